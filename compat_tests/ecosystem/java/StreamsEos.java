// A Kafka Streams 4.3.1 application as users write them, for the ecosystem tests: processing.guarantee
// exactly_once_v2, a persistent (RocksDB) key-value store of counts per key with its changelog topic, and for each
// input record (key k, value v) an output record (k, "v:<count of k so far>").
//
//   java StreamsEos <bootstrap> <application.id> <input> <output> <state.dir>
//
// Lines out: "STATE <new state>" at each state change (RUNNING once it has its tasks), "PROCESSED <value>" for each
// record processed (before its transaction commits), "ERROR <text>" from the uncaught-exception handler.
// It runs until killed (the tests SIGKILL it) or stdin ends (then it closes).
import java.time.Duration;
import java.util.Properties;
import java.util.Scanner;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public class StreamsEos {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** Counts records per key in the "counts" store and writes "value:count". */
    static class Counter implements FixedKeyProcessor<String, String, String> {
        private FixedKeyProcessorContext<String, String> context;
        private KeyValueStore<String, Long> counts;

        @Override
        public void init(FixedKeyProcessorContext<String, String> context) {
            this.context = context;
            this.counts = context.getStateStore("counts");
        }

        @Override
        public void process(FixedKeyRecord<String, String> record) {
            Long seen = counts.get(record.key());
            long count = (seen == null ? 0 : seen) + 1;
            counts.put(record.key(), count);
            context.forward(record.withValue(record.value() + ":" + count));
            say("PROCESSED " + record.value());
        }
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        // The restarted instance keeps the killed one's member id (static membership): its partitions are its
        // own again at once instead of after the dead member's session timeout.
        p.put(StreamsConfig.consumerPrefix("group.instance.id"), args[1] + "-1");
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("counts"),
                Serdes.String(), Serdes.Long()));
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
                .processValues(Counter::new, "counts")
                .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> say("STATE " + now));
        streams.setUncaughtExceptionHandler(e -> {
            say("ERROR " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        Scanner in = new Scanner(System.in);
        while (in.hasNextLine()) {
            in.nextLine();
        }
        streams.close(Duration.ofSeconds(30));
    }
}
