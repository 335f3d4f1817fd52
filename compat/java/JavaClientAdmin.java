// The Admin scenario of SamsaJavaClient (see there): topics, configs, partitions, records and
// consumer groups through Kafka's own Admin client, and the exception class of each call that
// must fail. Each step's outcome goes into the result under its name: the values read, or
// {"error": exception class} when it threw.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

final class JavaClientAdmin {

    /** The outcome of one call: its value, or {"error": the exception class} (an
     *  ExecutionException's cause: what the Admin's futures fail with). */
    static Object attempt(Callable<Object> call) {
        try {
            Object v = call.call();
            return v == null ? "ok" : v;
        } catch (ExecutionException e) {
            return Map.of("error", e.getCause().getClass().getName());
        } catch (Exception e) {
            return Map.of("error", e.getClass().getName());
        }
    }

    static Map<String, Object> describeTopic(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", d.name());
        m.put("internal", d.isInternal());
        m.put("topicIdSet", d.topicId() != null && !d.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"));
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            Map<String, Object> pm = new LinkedHashMap<>();
            pm.put("partition", p.partition());
            pm.put("leader", p.leader() == null ? null : p.leader().id());
            pm.put("replicas", ids(p.replicas()));
            pm.put("isr", ids(p.isr()));
            parts.add(pm);
        }
        m.put("partitions", parts);
        return m;
    }

    static List<Object> ids(Collection<Node> nodes) {
        List<Object> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out;
    }

    /** The named entries of a topic's config: {name: {"value", "source", "default"}}. */
    static Map<String, Object> topicConfig(Admin admin, String topic, List<String> names) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = admin.describeConfigs(List.of(r)).all().get().get(r);
        Map<String, Object> out = new TreeMap<>();
        for (String name : names) {
            ConfigEntry e = config.get(name);
            if (e == null) {
                out.put(name, null);
                continue;
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("value", e.value());
            m.put("source", e.source().toString());
            m.put("default", e.isDefault());
            m.put("readOnly", e.isReadOnly());
            m.put("sensitive", e.isSensitive());
            out.put(name, m);
        }
        out.put("(entries)", config.entries().size());
        return out;
    }

    static Map<String, Object> admin(Map<String, Object> spec) throws Exception {
        String bootstrap = SamsaJavaClient.str(spec, "bootstrap"), topic = SamsaJavaClient.str(spec, "topic");
        String group = topic + "-g";
        List<String> configNames = List.of("retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes");
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = SamsaJavaClient.admin(bootstrap)) {
            // -- cluster
            out.put("describeCluster", attempt(() -> {
                DescribeClusterResult c = admin.describeCluster();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("clusterId", c.clusterId().get());
                m.put("controller", c.controller().get().id());
                List<Object> nodes = new ArrayList<>();
                for (Node n : c.nodes().get()) nodes.add(Map.of("id", n.id(), "host", n.host(), "port", n.port()));
                m.put("nodes", nodes);
                return m;
            }));

            // -- topics
            Map<String, String> configs = Map.of("retention.ms", "3600000", "max.message.bytes", "200000");
            out.put("createValidateOnly", attempt(() -> {
                CreateTopicsResult r = admin.createTopics(List.of(new NewTopic(topic + "-v", 3, (short) 1).configs(configs)),
                        new CreateTopicsOptions().validateOnly(true));
                r.all().get();
                return Map.of("numPartitions", r.numPartitions(topic + "-v").get());
            }));
            out.put("describeValidateOnlyTopic", attempt(() -> describeTopic(admin, topic + "-v")));
            out.put("create", attempt(() -> {
                CreateTopicsResult r = admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1).configs(configs)));
                r.all().get();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("numPartitions", r.numPartitions(topic).get());
                m.put("replicationFactor", r.replicationFactor(topic).get());
                m.put("topicIdSet", r.topicId(topic).get() != null);
                Config c = r.config(topic).get();
                m.put("retention.ms", c.get("retention.ms").value());
                m.put("max.message.bytes", c.get("max.message.bytes").value());
                return m;
            }));
            out.put("createExisting", attempt(() -> admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get()));
            out.put("createInvalidConfigValue", attempt(() -> admin.createTopics(List.of(
                    new NewTopic(topic + "-bad", 1, (short) 1).configs(Map.of("retention.ms", "soon")))).all().get()));
            out.put("createUnknownConfig", attempt(() -> admin.createTopics(List.of(
                    new NewTopic(topic + "-bad", 1, (short) 1).configs(Map.of("no.such.config", "1")))).all().get()));
            out.put("createBadReplicationFactor", attempt(() -> admin.createTopics(List.of(
                    new NewTopic(topic + "-bad", 1, (short) 3))).all().get()));
            out.put("createBadPartitions", attempt(() -> admin.createTopics(List.of(
                    new NewTopic(topic + "-bad", 0, (short) 1))).all().get()));
            out.put("createBadName", attempt(() -> admin.createTopics(List.of(
                    new NewTopic("bad/name", 1, (short) 1))).all().get()));
            out.put("describe", attempt(() -> describeTopic(admin, topic)));
            out.put("describeMissing", attempt(() -> describeTopic(admin, topic + "-missing")));
            out.put("listTopicsHas", attempt(() -> admin.listTopics().names().get().contains(topic)));

            // -- configs
            out.put("configs", attempt(() -> topicConfig(admin, topic, configNames)));
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            out.put("alterValidateOnly", attempt(() -> admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "1"), AlterConfigOp.OpType.SET))),
                    new AlterConfigsOptions().validateOnly(true)).all().get()));
            out.put("alter", attempt(() -> admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                    .all().get()));
            out.put("configsAfterAlter", attempt(() -> topicConfig(admin, topic, configNames)));
            out.put("alterInvalidValue", attempt(() -> admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get()));
            out.put("alterUnknownConfig", attempt(() -> admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all().get()));
            ConfigResource missing = new ConfigResource(ConfigResource.Type.TOPIC, topic + "-missing");
            out.put("alterMissingTopic", attempt(() -> admin.incrementalAlterConfigs(Map.of(missing, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET)))).all().get()));
            out.put("describeConfigsMissingTopic", attempt(() -> admin.describeConfigs(List.of(missing)).all().get()));

            // -- partitions
            out.put("createPartitions", attempt(() -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4)))
                    .all().get()));
            out.put("describeAfterCreatePartitions", attempt(() -> describeTopic(admin, topic)));
            out.put("createPartitionsFewer", attempt(() -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2)))
                    .all().get()));
            out.put("createPartitionsMissingTopic", attempt(() -> admin.createPartitions(
                    Map.of(topic + "-missing", NewPartitions.increaseTo(2))).all().get()));

            // -- records: 10 in partition 0, then the first 4 deleted
            TopicPartition tp0 = new TopicPartition(topic, 0);
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (KafkaProducer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
                p.flush();
            }
            out.put("deleteRecords", attempt(() -> admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(4)))
                    .lowWatermarks().get(tp0).get().lowWatermark()));
            out.put("earliestAfterDeleteRecords", attempt(() -> JavaClientData.listOffset(admin, tp0, OffsetSpec.earliest())));
            out.put("deleteRecordsBeyondEnd", attempt(() -> admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(99)))
                    .lowWatermarks().get(tp0).get().lowWatermark()));

            // -- consumer groups: a classic member reads partition 0's 6 records and commits
            Properties cp = SamsaJavaClient.consumerProps(bootstrap, "read_uncommitted");
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
                c.subscribe(List.of(topic));
                int got = 0;
                long deadline = System.currentTimeMillis() + 60_000;
                while (got < 6) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("group read " + got);
                    ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                    got += rs.count();
                    c.commitSync();
                }
                out.put("groupRead", got);
                out.put("listGroupsWhileActive", attempt(() -> listGroups(admin, group)));
                out.put("describeGroupWhileActive", attempt(() -> describeGroup(admin, group)));
                out.put("alterOffsetsWhileActive", attempt(() -> admin.alterConsumerGroupOffsets(group,
                        Map.of(tp0, new OffsetAndMetadata(5))).all().get()));
                out.put("deleteOffsetsWhileSubscribed", attempt(() -> admin.deleteConsumerGroupOffsets(group, Set.of(tp0))
                        .all().get()));
                out.put("deleteGroupWhileActive", attempt(() -> admin.deleteConsumerGroups(List.of(group)).all().get()));
            }
            out.put("listGroupsEmpty", attempt(() -> listGroups(admin, group)));
            out.put("describeGroupEmpty", attempt(() -> describeGroup(admin, group)));
            out.put("groupOffsets", attempt(() -> groupOffsets(admin, group)));
            out.put("alterOffsets", attempt(() -> admin.alterConsumerGroupOffsets(group, Map.of(
                    tp0, new OffsetAndMetadata(7, "seven"), new TopicPartition(topic, 1), new OffsetAndMetadata(0)))
                    .all().get()));
            out.put("groupOffsetsAfterAlter", attempt(() -> groupOffsets(admin, group)));
            out.put("deleteOffsets", attempt(() -> admin.deleteConsumerGroupOffsets(group, Set.of(tp0)).all().get()));
            out.put("groupOffsetsAfterDelete", attempt(() -> groupOffsets(admin, group)));
            out.put("describeMissingGroup", attempt(() -> describeGroup(admin, group + "-missing")));
            out.put("groupOffsetsMissingGroup", attempt(() -> groupOffsets(admin, group + "-missing")));
            out.put("deleteGroup", attempt(() -> admin.deleteConsumerGroups(List.of(group)).all().get()));
            out.put("listGroupsAfterDelete", attempt(() -> listGroups(admin, group)));
            out.put("deleteMissingGroup", attempt(() -> admin.deleteConsumerGroups(List.of(group)).all().get()));

            // -- topic deletion
            out.put("deleteTopic", attempt(() -> admin.deleteTopics(List.of(topic)).all().get()));
            out.put("describeDeleted", attempt(() -> {
                // (deletion is asynchronous in Kafka too: wait until metadata no longer has it)
                long deadline = System.currentTimeMillis() + 30_000;
                while (admin.listTopics().names().get().contains(topic)) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("still listed");
                    Thread.sleep(50);
                }
                return describeTopic(admin, topic);
            }));
            out.put("deleteMissingTopic", attempt(() -> admin.deleteTopics(List.of(topic + "-missing")).all().get()));
        }
        return out;
    }

    static Object listGroups(Admin admin, String group) throws Exception {
        for (GroupListing g : admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get()) {
            if (!g.groupId().equals(group)) continue;
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("type", g.type().map(Object::toString).orElse(null));
            m.put("protocol", g.protocol());
            m.put("state", g.groupState().map(Object::toString).orElse(null));
            m.put("simpleConsumerGroup", g.isSimpleConsumerGroup());
            return m;
        }
        return "absent";
    }

    static Object describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("groupId", d.groupId());
        m.put("state", d.groupState().toString());
        m.put("type", d.type().toString());
        m.put("assignor", d.partitionAssignor());
        m.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
        List<Object> members = new ArrayList<>();
        for (MemberDescription md : d.members()) {
            Map<String, Object> mm = new LinkedHashMap<>();
            mm.put("clientId", md.clientId());
            mm.put("memberIdSet", !md.consumerId().isEmpty());
            mm.put("assignment", new ArrayList<>(JavaClientData.names(md.assignment().topicPartitions())));
            members.add(mm);
        }
        m.put("members", members);
        return m;
    }

    static Object groupOffsets(Admin admin, String group) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach((tp, om) ->
                out.put(tp.toString(), om == null ? null : List.of(om.offset(), om.metadata())));
        return out;
    }

    private JavaClientAdmin() {
    }
}
