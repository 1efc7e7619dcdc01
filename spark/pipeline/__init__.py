"""The activity-stream pipeline: page views -> per-page per-minute counts -> compacted topic + Parquet.

Run it end to end with `python -m logway.spark.pipeline --bootstrap HOST:PORT`.
"""
