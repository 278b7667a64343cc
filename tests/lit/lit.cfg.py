# lit configuration for kiln's FileCheck tests on irdump output (DESIGN.md §11).
#
# Tests are *.kir (IR text with RUN lines in `//` comments) and *.test files
# under tests/lit/. RUN lines name the tools plainly:
#   // RUN: irdump %s --passes=cse | FileCheck %s
#
# Run through CTest (label `lit`), or by hand:
#   python3 /usr/lib/llvm-19/build/utils/lit/lit.py -v build/tests/lit
# where build/tests/lit/lit.site.cfg.py, written by CMake, names the build
# directory and FileCheck and then loads this file. From the source tree,
#   KILN_BUILD_DIR=build python3 .../lit.py -v tests/lit
# works too (KILN_BUILD_DIR defaults to <repo>/build, FILECHECK to LLVM 19's).

import os
import shutil

import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".kir", ".test"]
# Input files that tests read but that are not tests themselves.
config.excludes = ["Inputs"]

repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
config.test_source_root = os.path.dirname(os.path.abspath(__file__))

# Set by lit.site.cfg.py when lit runs on the build tree; else from the environment.
if not hasattr(config, "kiln_build_dir"):
    config.kiln_build_dir = os.path.abspath(os.environ.get("KILN_BUILD_DIR", os.path.join(repo_root, "build")))
if not hasattr(config, "filecheck"):
    config.filecheck = os.environ.get("FILECHECK") or shutil.which("FileCheck") or "/usr/lib/llvm-19/bin/FileCheck"
config.test_exec_root = os.path.join(config.kiln_build_dir, "tests", "lit")

tools_dir = os.path.join(config.kiln_build_dir, "bin")
for tool in ("irdump", "kiln-bench"):
    if not os.path.exists(os.path.join(tools_dir, tool)):
        lit_config.warning("%s is not built in %s" % (tool, tools_dir))
if not os.path.exists(config.filecheck):
    lit_config.fatal("FileCheck not found at %s (Debian package llvm-19-tools)" % config.filecheck)


def tool(name):
    # Matches the tool's name as a word of a RUN line, not inside a path or
    # another word (irdump-help.test, --irdump-flag, /x/irdump).
    return r"(?<![\w./-])%s(?![\w./-])" % name


config.substitutions.append((tool("irdump"), os.path.join(tools_dir, "irdump")))
config.substitutions.append((tool("kiln-bench"), os.path.join(tools_dir, "kiln-bench")))
config.substitutions.append((tool("FileCheck"), config.filecheck))
config.substitutions.append(("%kiln_build_dir", config.kiln_build_dir))

# Tools are found by name too; results must not depend on the user's cache.
config.environment["PATH"] = os.pathsep.join(
    [tools_dir, os.path.dirname(config.filecheck), config.environment.get("PATH", os.environ.get("PATH", ""))]
)
# Every pass irdump runs is followed by the verifier (DESIGN.md §5).
config.environment["KILN_VERIFY_EACH"] = "1"
config.environment["KILN_CACHE_DIR"] = os.path.join(config.test_exec_root, "kernel-cache")
