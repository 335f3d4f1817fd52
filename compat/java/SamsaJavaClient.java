// Apache Kafka's own Java client (kafka-clients, from scripts/kafka-jars.sh clients) against a
// broker, for tests/compat/test_java_client.py. One scenario per run:
//
//   java -cp "$(scripts/kafka-jars.sh --print-classpath clients):build/java" SamsaJavaClient \
//        '{"scenario": "txn-commit-abort", "bootstrap": "127.0.0.1:9092", "topic": "t", ...}'
//
// The last line on stdout is one JSON object: the scenario's result, or {"error": "...",
// "errorClass": "..."} with exit status 1. The client's own log goes to stderr (slf4j-simple,
// level "logLevel", default warn; "debugLoggers": logger names to log at debug).
//
// A scenario is a function spec -> result map, registered in SCENARIOS; later work adds
// produce / consume / admin ones the same way. No JSON library ships with kafka-clients, so a
// small reader and writer are at the bottom.
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class SamsaJavaClient {

    interface Scenario {
        Map<String, Object> run(Map<String, Object> spec) throws Exception;
    }

    static final Map<String, Scenario> SCENARIOS = Map.of(
            "txn-commit-abort", SamsaJavaClient::txnCommitAbort,
            "txn-consume-transform-produce", SamsaJavaClient::txnConsumeTransformProduce,
            "txn-fencing", SamsaJavaClient::txnFencing,
            "produce-consume", JavaClientData::produceConsume,
            "group-rebalance", JavaClientData::groupRebalance,
            "admin", JavaClientAdmin::admin,
            "admin-diff", JavaAdminDiff::run,
            "produce-one", JavaClientData::produceOne);

    public static void main(String[] args) {
        int status = 0;
        Map<String, Object> out;
        try {
            if (args.length != 1) throw new IllegalArgumentException("usage: SamsaJavaClient '<json spec>'");
            Map<String, Object> spec = Json.object(Json.parse(args[0]));
            configureLogging(spec);
            Scenario scenario = SCENARIOS.get(str(spec, "scenario"));
            if (scenario == null) throw new IllegalArgumentException("unknown scenario " + spec.get("scenario")
                    + " (known: " + new TreeMap<>(SCENARIOS).keySet() + ")");
            out = scenario.run(spec);
        } catch (Throwable e) {
            e.printStackTrace();
            Throwable root = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            out = new LinkedHashMap<>();
            out.put("error", String.valueOf(root));
            out.put("errorClass", root.getClass().getName());
            status = 1;
        }
        System.out.println(Json.write(out));
        System.out.flush();
        System.exit(status);  // (a client thread left behind must not keep the JVM up)
    }

    static void configureLogging(Map<String, Object> spec) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", str(spec, "logLevel", "warn"));
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        for (Object name : list(spec, "debugLoggers")) {
            System.setProperty("org.slf4j.simpleLogger.log." + name, "debug");
        }
    }

    // -- scenarios ----------------------------------------------------------------------------

    /** Three transactions over two partitions: commit, abort, commit; then what read_committed
     *  and read_uncommitted consumers read, and the producer epoch after each transaction as the
     *  coordinator (DescribeTransactions), the partition leaders (DescribeProducers) and the
     *  producer itself know it. */
    static Map<String, Object> txnCommitAbort(Map<String, Object> spec) throws Exception {
        String bootstrap = str(spec, "bootstrap"), topic = str(spec, "topic");
        String tid = str(spec, "transactionalId", topic + "-tx");
        int n = num(spec, "count", 10), partitions = num(spec, "partitions", 2);
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, partitions);
            List<Object> txns = new ArrayList<>();
            try (KafkaProducer<String, String> p = transactionalProducer(bootstrap, tid)) {
                p.initTransactions();
                out.put("transactionV2", transactionV2(p));
                txns.add(txnState(admin, tid, p, "init"));
                String[] prefixes = {"c1", "a2", "c3"};
                for (String prefix : prefixes) {
                    p.beginTransaction();
                    for (int i = 0; i < n; i++) {
                        p.send(new ProducerRecord<>(topic, i % partitions, "k" + i, prefix + "-" + i));
                    }
                    if (prefix.startsWith("c")) {
                        p.commitTransaction();
                    } else {
                        p.flush();  // (written to the log, then aborted)
                        p.abortTransaction();
                    }
                    txns.add(txnState(admin, tid, p, prefix.startsWith("c") ? "commit" : "abort"));
                }
            }
            out.put("transactions", txns);
            awaitCompleted(admin, tid);
            List<TopicPartition> tps = partitionsOf(topic, partitions);
            out.put("producers", producers(admin, tps));
            out.put("committed", readAll(bootstrap, tps, "read_committed"));
            out.put("uncommitted", readAll(bootstrap, tps, "read_uncommitted"));
        }
        return out;
    }

    /** A consumer of `input` (group `group`, read_committed) copies each polled batch to
     *  `output` in one transaction that also commits the consumer's offsets
     *  (sendOffsetsToTransaction with consumer.groupMetadata()); then the group's offsets as an
     *  Admin lists them and what a read_committed consumer reads from `output`. */
    static Map<String, Object> txnConsumeTransformProduce(Map<String, Object> spec) throws Exception {
        String bootstrap = str(spec, "bootstrap"), input = str(spec, "input"), output = str(spec, "output");
        String group = str(spec, "group"), tid = str(spec, "transactionalId", output + "-copier");
        int n = num(spec, "count", 50), partitions = num(spec, "partitions", 2);
        long deadline = System.currentTimeMillis() + num(spec, "timeoutMs", 120_000);
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, input, partitions);
            createTopic(admin, output, partitions);
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.ACKS_CONFIG, "all");
            try (KafkaProducer<String, String> plain = new KafkaProducer<>(pp, new StringSerializer(),
                    new StringSerializer())) {
                for (int i = 0; i < n; i++) plain.send(new ProducerRecord<>(input, i % partitions, "k" + i, "in-" + i));
                plain.flush();
            }
            Properties cp = consumerProps(bootstrap, "read_committed");
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(num(spec, "maxPollRecords", 7)));
            cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, str(spec, "groupProtocol", "classic"));
            int copied = 0, transactions = 0;
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(),
                    new StringDeserializer());
                 KafkaProducer<String, String> p = transactionalProducer(bootstrap, tid)) {
                p.initTransactions();
                out.put("transactionV2", transactionV2(p));
                c.subscribe(List.of(input));
                while (copied < n) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("copied " + copied + " of " + n + " before the deadline");
                    }
                    ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                    if (records.isEmpty()) continue;
                    p.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        p.send(new ProducerRecord<>(output, r.partition(), r.key(), "out-" + r.value()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                    p.commitTransaction();
                    copied += records.count();
                    transactions++;
                }
            }
            out.put("copied", copied);
            out.put("transactions", transactions);
            awaitCompleted(admin, tid);
            Map<String, Object> groupOffsets = new TreeMap<>();
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach(
                    (tp, om) -> groupOffsets.put(tp.toString(), om == null ? null : om.offset()));
            out.put("groupOffsets", groupOffsets);
            out.put("output", readAll(bootstrap, partitionsOf(output, partitions), "read_committed"));
        }
        return out;
    }

    /** Producer 1 opens a transaction and writes to the log; producer 2 with the same
     *  transactional id initTransactions (fencing 1, whose transaction is aborted) and commits
     *  its own; producer 1's commitTransaction must fail (with "sendAfterFence", producer 1
     *  first sends one more record, which must not be written). */
    static Map<String, Object> txnFencing(Map<String, Object> spec) throws Exception {
        String bootstrap = str(spec, "bootstrap"), topic = str(spec, "topic");
        String tid = str(spec, "transactionalId", topic + "-tx");
        int n = num(spec, "count", 10), partitions = num(spec, "partitions", 2);
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, partitions);
            KafkaProducer<String, String> p1 = transactionalProducer(bootstrap, tid);
            try {
                p1.initTransactions();
                out.put("transactionV2", transactionV2(p1));
                out.put("first", txnState(admin, tid, p1, "init"));
                p1.beginTransaction();
                for (int i = 0; i < n; i++) p1.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "p1-" + i));
                p1.flush();
                try (KafkaProducer<String, String> p2 = transactionalProducer(bootstrap, tid)) {
                    p2.initTransactions();
                    out.put("second", txnState(admin, tid, p2, "init"));
                    if (Boolean.TRUE.equals(spec.get("sendAfterFence"))) {
                        // the fenced producer writes again: its partition leaders must refuse it
                        try {
                            p1.send(new ProducerRecord<>(topic, 0, "late", "p1-late")).get();
                            out.put("lateSend", "written");
                        } catch (ExecutionException e) {
                            out.put("lateSend", e.getCause().getClass().getName());
                        } catch (Exception e) {
                            out.put("lateSend", e.getClass().getName());
                        }
                    }
                    try {
                        p1.commitTransaction();
                        out.put("firstCommit", "committed");
                    } catch (Exception e) {
                        out.put("firstCommit", e.getClass().getName());
                        out.put("firstCommitMessage", String.valueOf(e.getMessage()));
                    }
                    p2.beginTransaction();
                    for (int i = 0; i < n; i++) {
                        p2.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "p2-" + i));
                    }
                    p2.commitTransaction();
                    out.put("secondCommitted", txnState(admin, tid, p2, "commit"));
                }
            } finally {
                p1.close(Duration.ZERO);
            }
            awaitCompleted(admin, tid);
            List<TopicPartition> tps = partitionsOf(topic, partitions);
            out.put("committed", readAll(bootstrap, tps, "read_committed"));
            out.put("uncommitted", readAll(bootstrap, tps, "read_uncommitted"));
        }
        return out;
    }

    // -- clients ------------------------------------------------------------------------------

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        return Admin.create(props);
    }

    static void createTopic(Admin admin, String topic, int partitions) throws Exception {
        try {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) throw e;
        }
    }

    static KafkaProducer<String, String> transactionalProducer(String bootstrap, String transactionalId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");  // (a loaded 2-core machine)
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    static Properties consumerProps(String bootstrap, String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        return props;
    }

    static List<TopicPartition> partitionsOf(String topic, int partitions) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        return tps;
    }

    /** Every record of the partitions from their start to their end offset as seen with
     *  `isolation` (the last stable offset for read_committed), without a group:
     *  [{"partition", "offset", "key", "value"}] by partition, then offset. */
    static List<Object> readAll(String bootstrap, List<TopicPartition> tps, String isolation) {
        List<Object> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, isolation),
                new StringDeserializer(), new StringDeserializer())) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            Map<Integer, List<Map<String, Object>>> byPartition = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (!reached(c, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(isolation + " read did not reach " + end);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    Map<String, Object> rec = new LinkedHashMap<>();
                    rec.put("partition", r.partition());
                    rec.put("offset", r.offset());
                    rec.put("key", r.key());
                    rec.put("value", r.value());
                    byPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(rec);
                }
            }
            byPartition.values().forEach(out::addAll);
        }
        return out;
    }

    static boolean reached(KafkaConsumer<String, String> c, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (c.position(e.getKey()) < e.getValue()) return false;
        }
        return true;
    }

    /** The coordinator's view of the transactional id (DescribeTransactions) and the producer's
     *  own id and epoch, after `step`. */
    static Map<String, Object> txnState(Admin admin, String tid, KafkaProducer<?, ?> producer, String step)
            throws Exception {
        TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("step", step);
        m.put("state", d.state().toString());
        m.put("producerId", d.producerId());
        m.put("producerEpoch", d.producerEpoch());
        long[] own = clientProducerIdAndEpoch(producer);
        m.put("clientProducerId", own[0]);
        m.put("clientProducerEpoch", own[1]);
        return m;
    }

    /** Waits until the coordinator has written the markers of the id's last transaction (its
     *  state is CompleteCommit or CompleteAbort): commitTransaction returns once the commit is
     *  decided, the markers follow, and a read_committed reader before them would stop short. */
    static void awaitCompleted(Admin admin, String tid) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get();
            TransactionState state = d.state();
            if (state == TransactionState.COMPLETE_COMMIT || state == TransactionState.COMPLETE_ABORT) return;
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("transaction of " + tid + " still " + state + " after 60 s");
            }
            Thread.sleep(20);  // (polling the coordinator: no event reaches a client when markers are written)
        }
    }

    /** DescribeProducers of each partition: {"topic-p": [{"producerId", "producerEpoch",
     *  "currentTransactionStartOffset"}]}. */
    static Map<String, Object> producers(Admin admin, Collection<TopicPartition> tps) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        admin.describeProducers(tps).all().get().forEach((tp, state) -> {
            List<Object> list = new ArrayList<>();
            for (ProducerState ps : state.activeProducers()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("producerId", ps.producerId());
                m.put("producerEpoch", ps.producerEpoch());
                m.put("currentTransactionStartOffset", ps.currentTransactionStartOffset().orElse(-1L));
                list.add(m);
            }
            out.put(tp.toString(), list);
        });
        return out;
    }

    // The client's transaction manager decides on transaction version 2 from the broker's
    // finalized features; it is not public API, so it is read by reflection (test use only).
    static Object transactionManager(KafkaProducer<?, ?> producer) throws Exception {
        Field f = KafkaProducer.class.getDeclaredField("transactionManager");
        f.setAccessible(true);
        return f.get(producer);
    }

    static boolean transactionV2(KafkaProducer<?, ?> producer) throws Exception {
        Object tm = transactionManager(producer);
        return (Boolean) tm.getClass().getMethod("isTransactionV2Enabled").invoke(tm);
    }

    static long[] clientProducerIdAndEpoch(KafkaProducer<?, ?> producer) throws Exception {
        Object tm = transactionManager(producer);
        Method m = tm.getClass().getDeclaredMethod("producerIdAndEpoch");
        m.setAccessible(true);
        Object pe = m.invoke(tm);
        long id = pe.getClass().getField("producerId").getLong(pe);
        long epoch = pe.getClass().getField("epoch").getShort(pe);
        return new long[] {id, epoch};
    }

    // -- spec access --------------------------------------------------------------------------

    static String str(Map<String, Object> spec, String key) {
        Object v = spec.get(key);
        if (v == null) throw new IllegalArgumentException("spec needs \"" + key + "\"");
        return v.toString();
    }

    static String str(Map<String, Object> spec, String key, String dflt) {
        Object v = spec.get(key);
        return v == null ? dflt : v.toString();
    }

    static int num(Map<String, Object> spec, String key, int dflt) {
        Object v = spec.get(key);
        return v == null ? dflt : ((Number) v).intValue();
    }

    static List<?> list(Map<String, Object> spec, String key) {
        Object v = spec.get(key);
        return v == null ? List.of() : (List<?>) v;
    }

    // -- JSON ---------------------------------------------------------------------------------

    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        static Object parse(String text) {
            Json p = new Json(text);
            Object v = p.value();
            p.ws();
            if (p.i != text.length()) throw p.error("trailing characters");
            return v;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> object(Object v) {
            if (!(v instanceof Map)) throw new IllegalArgumentException("spec is not a JSON object");
            return (Map<String, Object>) v;
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("JSON: " + what + " at " + i);
        }

        private void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }

        private Object value() {
            ws();
            if (i >= s.length()) throw error("unexpected end");
            char ch = s.charAt(i);
            if (ch == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                ws();
                if (s.charAt(i) == '}') { i++; return m; }
                while (true) {
                    ws();
                    String k = string();
                    ws();
                    expect(':');
                    m.put(k, value());
                    ws();
                    if (s.charAt(i) == ',') { i++; continue; }
                    expect('}');
                    return m;
                }
            }
            if (ch == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                ws();
                if (s.charAt(i) == ']') { i++; return l; }
                while (true) {
                    l.add(value());
                    ws();
                    if (s.charAt(i) == ',') { i++; continue; }
                    expect(']');
                    return l;
                }
            }
            if (ch == '"') return string();
            if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
            if (s.startsWith("null", i)) { i += 4; return null; }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String num = s.substring(start, i);
            if (num.isEmpty()) throw error("unexpected '" + ch + "'");
            if (num.contains(".") || num.contains("e") || num.contains("E")) return Double.parseDouble(num);
            return Long.parseLong(num);
        }

        private void expect(char ch) {
            if (i >= s.length() || s.charAt(i) != ch) throw error("expected '" + ch + "'");
            i++;
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                if (i >= s.length()) throw error("unterminated string");
                char ch = s.charAt(i++);
                if (ch == '"') return b.toString();
                if (ch != '\\') { b.append(ch); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: b.append(e);
                }
            }
        }

        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        private static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) b.append(", ");
                    first = false;
                    writeString(b, String.valueOf(e.getKey()));
                    b.append(": ");
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof Collection) {
                b.append('[');
                boolean first = true;
                for (Object o : (Collection<?>) v) {
                    if (!first) b.append(", ");
                    first = false;
                    write(b, o);
                }
                b.append(']');
            } else if (v instanceof Number || v instanceof Boolean) {
                b.append(v);
            } else {
                writeString(b, v.toString());
            }
        }

        private static void writeString(StringBuilder b, String s) {
            b.append('"');
            for (int k = 0; k < s.length(); k++) {
                char ch = s.charAt(k);
                if (ch == '"' || ch == '\\') b.append('\\').append(ch);
                else if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
                else b.append(ch);
            }
            b.append('"');
        }
    }

    private SamsaJavaClient() {
    }
}
