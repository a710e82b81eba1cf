"""How the driver JVM changestream starts compiles Java code: HotSpot's optimizing compiler
(C2) takes a method once it has run ten times as often as HotSpot's default asks.

The sink's JVM mostly makes Iceberg commits: code that runs a few times a batch, which
under the default thresholds C2 goes on compiling batch after batch, on a compiler thread
that takes a CPU from the router (0.25-0.67 s of CPU in each landing of 300,000 changes
on 2 CPUs, docs/performance.md). A Spark job's per-row code passes the higher thresholds
within its first rows and is compiled as before. Options of the user's own that set a
compiler threshold or mode win: then none of these is added."""

from __future__ import annotations

from .class_sharing import where_options_name

#: C2's thresholds, ten times HotSpot 17's defaults (5,000, 15,000 and 40,000).
COMPILER_OPTIONS = ("-XX:Tier4InvocationThreshold=50000",
                    "-XX:Tier4CompileThreshold=150000",
                    "-XX:Tier4BackEdgeThreshold=400000")
#: Options by which the user chooses how the JVM compiles (then ours stay out).
COMPILER_MARKERS = ("Tier", "CompileThreshold", "-Xint", "-Xcomp", "-XX:-UseCompiler",
                    "BackEdgeThreshold")


def compiler_options(settings: dict[str, object]) -> str:
    """The compiler options to add to the driver JVM's (``""``: the user's own options,
    in ``settings`` or where else the JVM takes options from, choose them)."""
    if where_options_name(settings, COMPILER_MARKERS) is not None:
        return ""
    return " ".join(COMPILER_OPTIONS)
