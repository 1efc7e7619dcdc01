import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * A per-key running count and sum in a Kafka Streams topology, for compat_tests/ecosystem/test_kafka_streams.py:
 * input records (key, decimal integer) are aggregated into "count sum" per key in a persistent (RocksDB) KeyValue
 * store backed by a changelog topic, and every update goes to the output topic (the record cache is off, so one
 * output record per input record). The test SIGKILLs this process mid-stream and starts it again on the same
 * state directory. A persistent store makes Streams keep its process id there, so the restarted instance has the
 * killed one's transactional.id: its InitProducerId fences the killed producer and aborts its open transaction,
 * and the store, dirty after the crash, is wiped and restored from the changelog (exactly_once_v2's recovery).
 * Under exactly_once_v2 the committed output then holds, for every key, the counts 1..n exactly once.
 *
 * usage: RunningSum BOOTSTRAP APPLICATION_ID INPUT OUTPUT GUARANTEE STATE_DIR [HOLD_AT]
 *   GUARANTEE is exactly_once_v2 or at_least_once. Prints "STATE <state>" on every state change and
 *   "PROCESSED <n>" every 200 records, on stdout, flushed; runs until killed. With HOLD_AT, the stream thread
 *   stops in the middle of that record (its updates sent, nothing committed since the last commit) and prints
 *   "HOLDING <n>", so the test's SIGKILL lands inside an open transaction, every time.
 */
public final class RunningSum {
    private RunningSum() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 6 && args.length != 7) {
            System.err.println("usage: RunningSum BOOTSTRAP APPLICATION_ID INPUT OUTPUT GUARANTEE STATE_DIR [HOLD_AT]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[4]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // The same commit interval for both guarantees (exactly_once_v2's default), so the two differ only in
        // whether a commit is a transaction.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // Send each store update (changelog) and output record at once rather than after Streams' 100 ms linger,
        // so the killed instance leaves its work since the last commit on the broker: under exactly_once_v2 in
        // a transaction that must be aborted, under at_least_once as records that will be counted again.
        props.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 0);
        // Static membership: the restarted instance takes over its own assignment at once instead of waiting a
        // session timeout for the killed member to leave the group.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), args[1] + "-instance");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        long holdAt = args.length > 6 ? Long.parseLong(args[6]) : -1;
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> sums = builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .aggregate(() -> "0 0", (key, value, agg) -> {
                    String[] parts = agg.split(" ");
                    long count = Long.parseLong(parts[0]) + 1;
                    long sum = Long.parseLong(parts[1]) + Long.parseLong(value);
                    return count + " " + sum;
                },
                Materialized.<String, String>as(Stores.persistentKeyValueStore("sums"))
                    .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
            .toStream();
        sums.to(args[3], Produced.with(Serdes.String(), Serdes.String()));
        // A record reaches this second child after its update went to the changelog and the output topic.
        AtomicLong processed = new AtomicLong();
        sums.foreach((key, value) -> {
            long n = processed.incrementAndGet();
            if (n == holdAt) {
                hold(n);
            } else if (n % 200 == 0) {
                System.out.println("PROCESSED " + n);
                System.out.flush();
            }
        });

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch dead = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                dead.countDown();
            }
        });
        streams.start();
        dead.await();
        streams.close();
        System.exit(1);
    }

    /** Stop the stream thread inside record n's processing, after its sends and before any commit, until killed:
     *  the transaction (exactly_once_v2) or the uncommitted offsets (at_least_once) stay open at a known point. */
    private static void hold(long n) {
        System.out.println("HOLDING " + n);
        System.out.flush();
        try {
            new CountDownLatch(1).await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
