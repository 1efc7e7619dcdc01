"""`pyspark_logway`, the module PySpark's data source scan imports: it offers the format, or nothing."""

import subprocess
import sys

import pytest

PROBE = "import sys; {block} import pyspark_logway; print(getattr(pyspark_logway, 'DefaultSource', None))"


@pytest.mark.parametrize("block, shown", [
    ("", "<class 'logway.spark.source.KafkaDataSource'>"),
    # Installed without the `spark` extra: PySpark's scan must still be able to import it.
    ("sys.modules['confluent_kafka'] = None;", "None"),
])
def test_pyspark_logway_offers_the_source_only_when_it_can_run(block, shown):
    done = subprocess.run([sys.executable, "-c", PROBE.format(block=block)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == shown
