
package changestream.iceberg;

import java.util.concurrent.ExecutorService;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileMetadata;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestWriter;
import org.apache.iceberg.Metrics;
import org.apache.iceberg.MetricsConfig;
import org.apache.iceberg.PartitionField;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.SchemaParser;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.SnapshotUpdate;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableUtil;
import org.apache.iceberg.parquet.ParquetUtil;
import org.apache.iceberg.util.JsonUtil;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.iceberg.relocated.com.google.common.util.concurrent.MoreExecutors;
import org.apache.iceberg.shaded.org.apache.parquet.HadoopReadOptions;
import org.apache.iceberg.shaded.org.apache.parquet.ParquetReadOptions;
import org.apache.iceberg.shaded.org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.iceberg.shaded.org.apache.parquet.hadoop.util.HadoopInputFile;

public class DriverCommits {
    private Configuration hadoop;
    private ParquetReadOptions readOptions;
    private ExecutorService direct;

    public void init(Configuration hadoop) {
        this.hadoop = hadoop;
        this.readOptions = HadoopReadOptions.builder(hadoop).build();
        this.direct = MoreExecutors.newDirectExecutorService();
    }

    /** The table's uuid, schema id, spec id, format version, a hash of its Parquet write
     *  properties (those facts gives) and current snapshot id (-1: none), one per
     *  line. */
    public String ids(Table table) {
        org.apache.iceberg.Snapshot current = table.currentSnapshot();
        java.util.Map props = table.properties();
        int parquet = (String.valueOf(props.get("write.parquet.compression-codec")) + "/"
            + String.valueOf(props.get("write.parquet.compression-level"))).hashCode();
        return table.uuid() + "\n" + table.schema().schemaId() + "\n"
            + table.spec().specId() + "\n" + TableUtil.formatVersion(table) + "\n"
            + parquet + "\n" + (current == null ? -1L : current.snapshotId());
    }

    /** The current snapshot id of the table (-1: none) on the first line, then per live
     *  data file a line "D\tlocation\trecord count", each followed by a line per delete
     *  file that applies to it: "P\tlocation" (positions) or "E\tlocation" (equality). */
    public String liveFilesAndDeletes(Table table) throws Exception {
        org.apache.iceberg.Snapshot current = table.currentSnapshot();
        StringBuilder out = new StringBuilder();
        out.append(current == null ? -1L : current.snapshotId()).append('\n');
        if (current == null) {
            return out.toString();
        }
        org.apache.iceberg.io.CloseableIterable tasks =
            table.newScan().useSnapshot(current.snapshotId()).planFiles();
        try {
            java.util.Iterator it = tasks.iterator();
            while (it.hasNext()) {
                org.apache.iceberg.FileScanTask task =
                    (org.apache.iceberg.FileScanTask) it.next();
                out.append("D\t").append(task.file().location()).append('\t')
                    .append(task.file().recordCount()).append('\n');
                java.util.Iterator deletes = task.deletes().iterator();
                while (deletes.hasNext()) {
                    DeleteFile delete = (DeleteFile) deletes.next();
                    boolean positions = delete.content() == org.apache.iceberg.FileContent.POSITION_DELETES;
                    out.append(positions ? "P\t" : "E\t").append(delete.location()).append('\n');
                }
            }
        } finally {
            tasks.close();
        }
        return out.toString();
    }

    /** What an append needs to know of the table, as JSON: its location, file IO class,
     *  schema (Iceberg's JSON, with field ids), metadata folder property, Parquet
     *  compression properties, and partition spec (its text and fields). */
    public String facts(Table table) throws Exception {
        java.util.Map facts = new java.util.LinkedHashMap();
        facts.put("location", table.location());
        facts.put("io", table.io().getClass().getName());
        facts.put("schema", SchemaParser.toJson(table.schema()));
        facts.put("metadata_path", table.properties().get("write.metadata.path"));
        facts.put("parquet_codec", table.properties().get("write.parquet.compression-codec"));
        facts.put("parquet_level", table.properties().get("write.parquet.compression-level"));
        PartitionSpec spec = table.spec();
        facts.put("spec", spec.toString());
        java.util.List fields = new java.util.ArrayList();
        java.util.Iterator it = spec.fields().iterator();
        while (it.hasNext()) {
            PartitionField field = (PartitionField) it.next();
            java.util.Map one = new java.util.LinkedHashMap();
            one.put("name", field.name());
            one.put("transform", field.transform().toString());
            one.put("source", table.schema().findColumnName(field.sourceId()));
            fields.add(one);
        }
        facts.put("partition_fields", fields);
        return JsonUtil.mapper().writeValueAsString(facts);
    }

    /** A Parquet file's column metrics, read from its footer as Iceberg's writers do. */
    public Metrics metrics(String location, MetricsConfig config) throws java.io.IOException {
        ParquetFileReader reader = ParquetFileReader.open(HadoopInputFile.fromPath(
            new org.apache.hadoop.fs.Path(location), hadoop), readOptions);
        try {
            return ParquetUtil.footerMetrics(reader.getFooter(),
                java.util.stream.Stream.empty(), config);
        } finally {
            reader.close();
        }
    }

    /** Create table namespace.name in catalog as Spark's CREATE TABLE does (the same
     *  catalog call, with the owner Spark adds), without its SQL parse and plan: the
     *  columns of the Spark schema (JSON), partitioned by day of dayColumn when that is
     *  not null, with the properties ("key\nvalue\n..."). */
    public void createTable(TableCatalog catalog, String namespace, String name,
                            String schemaJson, String dayColumn, String properties)
            throws Exception {
        StructType schema = (StructType) DataType.fromJson(schemaJson);
        Transform[] partitioning = dayColumn == null ? new Transform[0]
            : new Transform[] {Expressions.days(dayColumn)};
        java.util.Map props = new java.util.HashMap();
        String[] items = properties.split("\n", -1);
        for (int i = 0; i + 1 < items.length; i += 2) {
            props.put(items[i], items[i + 1]);
        }
        props.put(TableCatalog.PROP_OWNER, org.apache.spark.util.Utils.getCurrentUserName());
        ensureNamespace(catalog, namespace);
        catalog.createTable(Identifier.of(new String[] {namespace}, name), schema,
            partitioning, props);
    }

    /** Create namespace (a Hive Metastore's database) when the catalog keeps namespaces
     *  and lacks it: a Hive catalog refuses a table in a namespace it does not have (the
     *  Hadoop and JDBC ones make it with the table). Another process may create it at the
     *  same moment: that is fine. */
    private static void ensureNamespace(TableCatalog catalog, String namespace) {
        if (!(catalog instanceof org.apache.spark.sql.connector.catalog.SupportsNamespaces)) {
            return;
        }
        org.apache.spark.sql.connector.catalog.SupportsNamespaces namespaces =
            (org.apache.spark.sql.connector.catalog.SupportsNamespaces) catalog;
        String[] path = new String[] {namespace};
        if (namespaces.namespaceExists(path)) {
            return;
        }
        try {
            namespaces.createNamespace(path, new java.util.HashMap());
        } catch (org.apache.spark.sql.catalyst.analysis.NamespaceAlreadyExistsException e) {
            // made by another writer in between
        }
    }

    /** The locations of the data files of the table's current snapshot, one a line;
     *  null when delete files apply to one (its rows are not the file's alone). */
    public String liveFiles(Table table) throws Exception {
        StringBuilder out = new StringBuilder();
        org.apache.iceberg.io.CloseableIterable tasks = table.newScan().planFiles();
        try {
            java.util.Iterator it = tasks.iterator();
            while (it.hasNext()) {
                org.apache.iceberg.FileScanTask task =
                    (org.apache.iceberg.FileScanTask) it.next();
                if (!task.deletes().isEmpty()) {
                    return null;
                }
                out.append(task.file().location()).append('\n');
            }
        } finally {
            tasks.close();
        }
        return out.toString();
    }

    /** A snapshot that adds nothing, with the properties ("key\nvalue\n...") in its
     *  summary. */
    public void mark(Table table, String properties) {
        AppendFiles append = table.newAppend();
        append.scanManifestsWith(direct);
        commit(append, properties);
    }

    /** One commit of table that removes the data files named (one location a line) whole;
     *  it fails (a ValidationException) when one of them is no longer live. */
    public void deleteFiles(Table table, String locations) {
        org.apache.iceberg.DeleteFiles delete = table.newDelete();
        delete.scanManifestsWith(direct);
        String[] lines = locations.split("\n");
        for (int i = 0; i < lines.length; i++) {
            if (lines[i].length() > 0) {
                delete.deleteFile(lines[i]);
            }
        }
        delete.validateFilesExist();
        commit(delete, "");
    }

    /**
     * One commit of table: the data files ("location\tsize\tpartition path" per line, the
     * partition path empty for an unpartitioned table) added; when deleteLocation is not
     * null, an equality delete file of deleteRows rows on the field ids equalityIds
     * ("1,2") with it (a row delta); the properties ("key\nvalue\n...") in the summary.
     * manifestLocation: where an append's manifest is written here (format 2 only), null
     * to let Iceberg write it.
     */
    public void commitFiles(Table table, String dataFiles, String deleteLocation,
                            long deleteSize, long deleteRows, String equalityIds,
                            String manifestLocation, String properties) throws Exception {
        PartitionSpec spec = table.spec();
        MetricsConfig config = MetricsConfig.forTable(table);
        RowDelta delta = null;
        AppendFiles append = null;
        ManifestWriter manifest = null;
        SnapshotUpdate update;
        if (deleteLocation != null) {
            delta = table.newRowDelta();
            delta.scanManifestsWith(direct);
            String[] parts = equalityIds.split(",");
            int[] ids = new int[parts.length];
            for (int i = 0; i < parts.length; i++) {
                ids[i] = Integer.parseInt(parts[i]);
            }
            DeleteFile deletes = FileMetadata.deleteFileBuilder(spec).ofEqualityDeletes(ids)
                .withPath(deleteLocation).withFormat(FileFormat.PARQUET)
                .withFileSizeInBytes(deleteSize).withRecordCount(deleteRows)
                .withMetrics(metrics(deleteLocation, config)).build();
            delta.addDeletes(deletes);
            update = delta;
        } else {
            append = table.newAppend();
            append.scanManifestsWith(direct);
            update = append;
            if (manifestLocation != null) {
                manifest = ManifestFiles.write(2, spec,
                    table.io().newOutputFile(manifestLocation), (Long) null);
            }
        }
        if (dataFiles.length() > 0) {
            String[] lines = dataFiles.split("\n");
            for (int i = 0; i < lines.length; i++) {
                DataFile file = dataFile(spec, config, lines[i]);
                if (delta != null) {
                    delta.addRows(file);
                } else if (manifest != null) {
                    manifest.add(file);
                } else {
                    append.appendFile(file);
                }
            }
        }
        if (manifest != null) {
            manifest.close();
            append.appendManifest(manifest.toManifestFile());
        }
        commit(update, properties);
    }

    /**
     * One commit of table that deletes rows by position and adds data files: the data files
     * as commitFiles takes them; the position delete files ("location\tsize\trows" a line,
     * each of the deletes of one data file: Iceberg then applies it to that file alone) and
     * the data files they reference, one a line; the properties in the summary. Validated
     * as Iceberg's own merge-on-read writers are, against every commit after baseSnapshot
     * (-1: none): each referenced data file must still be live and no delete file added to
     * them meanwhile, or the commit fails (a ValidationException) and nothing is committed.
     * Returns the new snapshot's id and its parent's (-1: none), space-separated: a parent
     * other than baseSnapshot means another writer committed in between.
     */
    public String commitPositionDelta(Table table, String dataFiles, String deleteFiles,
                                      String referencedFiles, long baseSnapshot,
                                      String properties) throws Exception {
        PartitionSpec spec = table.spec();
        MetricsConfig config = MetricsConfig.forTable(table);
        RowDelta delta = table.newRowDelta();
        delta.scanManifestsWith(direct);
        if (deleteFiles.length() > 0) {
            MetricsConfig deleteConfig = MetricsConfig.forPositionDelete(table);
            String[] lines = deleteFiles.split("\n");
            for (int i = 0; i < lines.length; i++) {
                String[] fields = lines[i].split("\t", -1);
                delta.addDeletes(FileMetadata.deleteFileBuilder(spec).ofPositionDeletes()
                    .withPath(fields[0]).withFormat(FileFormat.PARQUET)
                    .withFileSizeInBytes(Long.parseLong(fields[1]))
                    .withRecordCount(Long.parseLong(fields[2]))
                    .withMetrics(metrics(fields[0], deleteConfig)).build());
            }
            java.util.List referenced = new java.util.ArrayList();
            String[] locations = referencedFiles.split("\n");
            for (int i = 0; i < locations.length; i++) {
                if (locations[i].length() > 0) {
                    referenced.add(locations[i]);
                }
            }
            if (baseSnapshot >= 0) {
                delta.validateFromSnapshot(baseSnapshot);
            }
            delta.validateDataFilesExist(referenced);
            delta.validateDeletedFiles();
            delta.validateNoConflictingDeleteFiles();
        }
        if (dataFiles.length() > 0) {
            String[] lines = dataFiles.split("\n");
            for (int i = 0; i < lines.length; i++) {
                delta.addRows(dataFile(spec, config, lines[i]));
            }
        }
        commit(delta, properties);
        org.apache.iceberg.Snapshot made = table.currentSnapshot();
        Long parent = made.parentId();
        return made.snapshotId() + " " + (parent == null ? -1L : parent.longValue());
    }

    /** A data file of the table from a line "location\tsize\tpartition path". */
    private DataFile dataFile(PartitionSpec spec, MetricsConfig config, String line)
            throws java.io.IOException {
        String[] fields = line.split("\t", -1);
        DataFiles.Builder builder = DataFiles.builder(spec).withPath(fields[0])
            .withFormat(FileFormat.PARQUET)
            .withFileSizeInBytes(Long.parseLong(fields[1]))
            .withMetrics(metrics(fields[0], config));
        if (fields[2].length() > 0) {
            builder = builder.withPartitionPath(fields[2]);
        }
        return builder.build();
    }

    private static void commit(SnapshotUpdate update, String properties) {
        if (properties.length() > 0) {
            String[] items = properties.split("\n", -1);
            for (int i = 0; i + 1 < items.length; i += 2) {
                update.set(items[i], items[i + 1]);
            }
        }
        update.commit();
    }
}
