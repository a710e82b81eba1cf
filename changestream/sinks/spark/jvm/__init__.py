"""The JVM the Spark sink starts: the jars it needs (jars), its local file system
(local_files), class-data sharing (class_sharing) with the commit rehearsal of the JVM that
writes the archive (rehearsal), and the session's start itself (start)."""
