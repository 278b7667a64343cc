// kiln::profiler::Profile: the Chrome trace it exports, parsed back —
// eager ops with and without shapes, nesting and order on each track,
// every launched kernel on a stream with a flow from its launch, compile
// phases of a cold and a warm compile, allocator events, the schedule, the
// key-averages table, KILN_PROFILE in a child process, and OpenCL kernels
// with device times.
#include "frontend/profiler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "codegen/disk_cache.h"
#include "codegen/kernel_cache.h"
#include "common/error_of.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;
using nlohmann::json;
namespace fs = std::filesystem;
using profiler::Profile;
using profiler::ProfileOptions;

ProfileOptions options(bool shapes = false, bool memory = false) {
  ProfileOptions o;
  o.recordShapes = shapes;
  o.profileMemory = memory;
  return o;
}

json traceOf(const Profile& p) { return json::parse(p.chromeTrace()); }

/// The complete ("X") events of a trace.
std::vector<json> complete(const json& trace) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") out.push_back(e);
  return out;
}

std::vector<json> named(const json& trace, const std::string& name, const std::string& cat = "") {
  std::vector<json> out;
  for (const json& e : complete(trace))
    if (e.at("name") == name && (cat.empty() || e.at("cat") == cat)) out.push_back(e);
  return out;
}

double ts(const json& e) { return e.at("ts").get<double>(); }
double endOf(const json& e) { return ts(e) + e.at("dur").get<double>(); }
/// Whether `inner` lies within `outer` (a nanosecond of rounding allowed).
bool within(const json& inner, const json& outer) {
  return inner.at("pid") == outer.at("pid") && inner.at("tid") == outer.at("tid") && ts(inner) >= ts(outer) - 1e-3 &&
         endOf(inner) <= endOf(outer) + 1e-3;
}

/// The pid of the process the trace names `name`.
int pidOf(const json& trace, const std::string& name) {
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name" && e.at("args").at("name") == name) return e.at("pid");
  return -1;
}

TEST(Profiler, RecordsNothingWhenNoProfileIsActive) {
  EXPECT_EQ(profiler::flags(), 0u);
  Tensor x = ones({8});
  Tensor y = kiln::exp(x) + 1.0;
  (void)y.toVector();
  EXPECT_TRUE(profiler::drain().empty()) << "events were recorded without a profile";
  {
    Profile p(options());
    p.start();
    EXPECT_NE(profiler::flags(), 0u);
    p.stop();
  }
  EXPECT_EQ(profiler::flags(), 0u) << "a stopped profile leaves recording off";
}

TEST(Profiler, EagerOpsRecordShapesAndDtypesOnlyWhenAsked) {
  Tensor x = ones({2, 3});
  Tensor b = fromVector({1, 2, 3}, {3});
  for (bool shapes : {true, false}) {
    Profile p(options(shapes));
    p.start();
    Tensor y = x + b;
    p.stop();
    const std::vector<json> adds = named(traceOf(p), "add", "op");
    ASSERT_EQ(adds.size(), 1u) << "shapes=" << shapes;
    const json& args = adds[0].at("args");
    if (shapes) {
      ASSERT_TRUE(args.contains("Input Dims"));
      EXPECT_EQ(args.at("Input Dims"), json::parse("[[2,3],[3]]"));
      EXPECT_EQ(args.at("Input type"), json::parse(R"(["f32","f32"])"));
    } else {
      EXPECT_FALSE(args.contains("Input Dims"));
      EXPECT_FALSE(args.contains("Input type"));
    }
  }
}

TEST(Profiler, RangesNestOnTheirThreadAndFollowTheOrderOfTheOps) {
  Tensor x = fromVector({-1, 2, -3, 4});
  Profile p(options());
  p.start();
  Tensor a = relu(x);
  Tensor b = kiln::exp(a);
  Tensor c = neg(b);
  p.stop();
  const json trace = traceOf(p);
  // Ranges on one host track either nest or are disjoint.
  std::map<std::pair<int, int>, std::vector<json>> tracks;
  for (const json& e : complete(trace)) tracks[{e.at("pid"), e.at("tid")}].push_back(e);
  for (auto& [track, events] : tracks) {
    for (size_t i = 1; i < events.size(); ++i)
      EXPECT_GE(ts(events[i]), ts(events[i - 1]))
          << "events out of order on track " << track.first << "/" << track.second;
    for (size_t i = 0; i < events.size(); ++i)
      for (size_t j = i + 1; j < events.size(); ++j) {
        const bool disjoint = ts(events[j]) >= endOf(events[i]) - 1e-3 || ts(events[i]) >= endOf(events[j]) - 1e-3;
        EXPECT_TRUE(disjoint || within(events[j], events[i]) || within(events[i], events[j]))
            << events[i].dump() << " and " << events[j].dump() << " overlap without nesting";
      }
  }
  // The three ops, in the order they ran, one after the other.
  const std::vector<json> relus = named(trace, "relu", "op"), exps = named(trace, "exp", "op"),
                          negs = named(trace, "neg", "op");
  ASSERT_EQ(relus.size(), 1u);
  ASSERT_EQ(exps.size(), 1u);
  ASSERT_EQ(negs.size(), 1u);
  EXPECT_LE(endOf(relus[0]), ts(exps[0]) + 1e-3);
  EXPECT_LE(endOf(exps[0]), ts(negs[0]) + 1e-3);
  // Each launch lies within the op that made it.
  const std::vector<json> launches = named(trace, "launch_kernel");
  ASSERT_EQ(launches.size(), 3u);
  for (const json& launch : launches) {
    int parents = 0;
    for (const json& op : {relus[0], exps[0], negs[0]}) parents += within(launch, op) ? 1 : 0;
    EXPECT_EQ(parents, 1) << launch.dump() << " is not inside exactly one op";
  }
}

TEST(Profiler, EveryLaunchedKernelIsOnAStreamWithAFlowFromItsLaunch) {
  auto f = compile([](const Tensor& x, const Tensor& w) {
    Tensor h = relu(matmul(x, w));
    return std::vector<Tensor>{softmax(h, -1), kiln::sum(h)};
  });
  Tensor x = randn({4, 8}), w = randn({8, 5});
  (void)f(x, w);  // compiled outside the profile
  Profile p(options());
  p.start();
  const int64_t before = runtime::kernelLaunchCount();
  auto out = f(x, w);
  Tensor eager = kiln::exp(out[0]) * 3.0;
  const int64_t launched = runtime::kernelLaunchCount() - before;
  p.stop();
  ASSERT_GE(f.lastNumKernels(), 2);
  ASSERT_GE(launched, f.lastNumKernels() + 2) << "the program and two eager ops";
  const json trace = traceOf(p);
  const int cpu = pidOf(trace, "cpu"), host = pidOf(trace, "kiln host");
  ASSERT_GT(cpu, 0) << "no process for the cpu device";
  ASSERT_GT(host, 0) << "no host process";
  ASSERT_NE(cpu, host);
  std::vector<json> kernels;
  for (const json& e : complete(trace))
    if (e.at("pid") == cpu) kernels.push_back(e);
  EXPECT_EQ(static_cast<int64_t>(kernels.size()), launched) << "kernels in the trace vs kernelLaunchCount()";
  for (const json& e : trace.at("traceEvents"))  // Perfetto takes pid 0 and tid 0 for the idle task
    EXPECT_TRUE(e.at("pid").get<int>() > 0 && e.at("tid").get<int>() > 0) << e.dump();
  // Flows: one start on the host and one end on the stream per kernel, ids matching.
  std::map<uint64_t, json> starts, ends;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "s") starts[e.at("id")] = e;
    if (e.at("ph") == "f") ends[e.at("id")] = e;
  }
  EXPECT_EQ(starts.size(), kernels.size());
  EXPECT_EQ(ends.size(), kernels.size());
  const std::vector<json> all = complete(trace);
  for (const json& k : kernels) {
    const uint64_t id = k.at("args").at("correlation");
    ASSERT_TRUE(starts.count(id) && ends.count(id)) << "no flow for " << k.dump();
    EXPECT_EQ(ends[id].at("pid"), k.at("pid"));
    EXPECT_EQ(ends[id].at("tid"), k.at("tid"));
    EXPECT_DOUBLE_EQ(ts(ends[id]), ts(k));
    EXPECT_EQ(starts[id].at("pid"), host);
    // The flow starts at a launch range with the same correlation.
    bool found = false;
    for (const json& e : all)
      found = found || (e.at("pid") == host && e.at("args").value("correlation", uint64_t{0}) == id &&
                        e.at("cat") == "launch" && ts(e) == ts(starts[id]) && e.at("tid") == starts[id].at("tid"));
    EXPECT_TRUE(found) << "flow " << id << " starts at no launch";
    EXPECT_GT(k.at("args").at("bytes moved").get<int64_t>(), 0) << k.dump();
    EXPECT_TRUE(k.at("args").contains("GB/s"));
  }
  // The matmul's library call moves its operands and result: (4*8 + 8*5 + 4*5) floats.
  bool matmul = false;
  for (const json& k : kernels)
    if (k.at("cat") == "library" && k.at("args").at("bytes moved") == (4 * 8 + 8 * 5 + 4 * 5) * 4) matmul = true;
  EXPECT_TRUE(matmul) << "no library call that moves the matmul's 368 bytes";
}

TEST(Profiler, ColdCompilesShowTheirPhasesAndWarmOnesHitTheKernelCache) {
  auto program = [](const Tensor& x) { return kiln::sum(kiln::tanh(x * 3.0 - 1.0), {-1}); };
  Tensor x = randn({3, 7});
  codegen::KernelCache::instance().clear();
  Profile cold(options());
  cold.start();
  auto f = compile(program);
  (void)f(x);
  cold.stop();
  const json trace = traceOf(cold);
  for (const char* phase : {"compiled_call", "compile", "trace", "pass_pipeline", "cse", "fuse-elementwise",
                            "compile_graph", "lowering", "kernel_cache_miss"})
    EXPECT_FALSE(named(trace, phase).empty()) << "no " << phase << " in a cold compile";
  EXPECT_TRUE(named(trace, "kernel_cache_hit").empty());
  EXPECT_FALSE(named(trace, "llvm_render_and_jit").empty() && named(trace, "llvm_load_from_disk_cache").empty());
  // Passes run inside the pipeline, inside the compile, inside the call.
  const json pipeline = named(trace, "pass_pipeline").at(0);
  EXPECT_TRUE(within(named(trace, "cse").at(0), pipeline));
  EXPECT_TRUE(within(pipeline, named(trace, "compile").at(0)));
  EXPECT_TRUE(within(named(trace, "compile").at(0), named(trace, "compiled_call").at(0)));
  EXPECT_TRUE(within(named(trace, "lowering").at(0), named(trace, "compile_graph").at(0)));

  Profile warm(options());
  warm.start();
  auto g = compile(program);  // a new function: traced again, its kernels in memory
  (void)g(x);
  warm.stop();
  const json warmTrace = traceOf(warm);
  EXPECT_FALSE(named(warmTrace, "kernel_cache_hit").empty());
  EXPECT_TRUE(named(warmTrace, "kernel_cache_miss").empty());

  if (!codegen::DiskCache::instance().enabled()) GTEST_SKIP() << "the disk cache is off";
  codegen::KernelCache::instance().clear();
  Profile disk(options());
  disk.start();
  auto h = compile(program);
  (void)h(x);
  disk.stop();
  const json diskTrace = traceOf(disk);
  EXPECT_FALSE(named(diskTrace, "disk_cache_hit").empty()) << "the cold compile stored the kernels on disk";
  EXPECT_FALSE(named(diskTrace, "llvm_load_from_disk_cache").empty());
}

TEST(Profiler, MemoryEventsOnlyWithProfileMemory) {
  for (bool memory : {true, false}) {
    Profile p(options(false, memory));
    p.start();
    {
      Tensor big = ones({1024});
      (void)(big * 2.0).toVector();
    }
    p.stop();
    int64_t allocated = 0, freed = 0;
    int counters = 0;
    const json trace = traceOf(p);  // named: a range-for over traceOf(p).at(...) would dangle
    for (const json& e : trace.at("traceEvents")) {
      if (e.at("ph") == "C") ++counters;
      if (e.at("ph") != "i" || e.at("name") != "[memory]") continue;
      const int64_t bytes = e.at("args").at("Bytes");
      (bytes > 0 ? allocated : freed) += bytes;
      EXPECT_EQ(e.at("args").at("Device"), "cpu");
      EXPECT_GE(e.at("args").at("Total Reserved").get<int64_t>(), e.at("args").at("Total Allocated").get<int64_t>());
    }
    if (memory) {
      EXPECT_GE(allocated, 2 * 1024 * 4) << "two tensors of 1024 floats";
      EXPECT_LE(freed, -2 * 1024 * 4) << "both freed";
      EXPECT_GT(counters, 0);
    } else {
      EXPECT_EQ(allocated, 0);
      EXPECT_EQ(freed, 0);
      EXPECT_EQ(counters, 0);
    }
  }
}

TEST(Profiler, TheScheduleRecordsOnlyActiveStepsAndReportsEachCycle) {
  ProfileOptions o;
  o.schedule = profiler::Schedule{.wait = 1, .warmup = 1, .active = 2, .repeat = 2};
  std::vector<std::vector<std::string>> cycles;  // per trace ready: its step markers
  std::vector<size_t> exps;                      // per trace ready: its exp ops
  o.onTraceReady = [&](Profile& p) {
    const json trace = traceOf(p);
    std::vector<std::string> steps;
    for (const json& e : complete(trace))
      if (e.at("cat") == "step") steps.push_back(e.at("name"));
    cycles.push_back(steps);
    exps.push_back(named(trace, "exp", "op").size());
    // Every op of the trace lies inside one of its steps.
    for (const json& op : complete(trace)) {
      if (op.at("cat") != "op") continue;
      bool inside = false;
      for (const json& s : complete(trace)) inside = inside || (s.at("cat") == "step" && within(op, s));
      EXPECT_TRUE(inside) << op.dump();
    }
  };
  Tensor x = ones({4});
  Profile p(o);
  p.start();
  for (int i = 0; i < 10; ++i) {
    (void)kiln::exp(x);
    p.step();
  }
  p.stop();
  ASSERT_EQ(cycles.size(), 2u) << "onTraceReady once per cycle, twice for repeat=2";
  EXPECT_EQ(cycles[0], (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3"}));
  EXPECT_EQ(cycles[1], (std::vector<std::string>{"ProfilerStep#6", "ProfilerStep#7"}));
  EXPECT_EQ(exps, (std::vector<size_t>{2, 2})) << "only the active steps' ops";
}

TEST(Profiler, KeyAveragesSortByEachKey) {
  auto f = compile([](const Tensor& x) { return relu(x) * 2.0; });
  Tensor x = randn({64, 64});
  Profile p(options());
  p.start();
  for (int i = 0; i < 3; ++i) (void)f(x);
  for (int i = 0; i < 5; ++i) (void)kiln::exp(x);
  p.stop();
  const profiler::KeyAverages averages = p.keyAverages();
  for (const char* key :
       {"cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total", "count"}) {
    const std::vector<profiler::KeyAverage> rows = averages.sorted(key);
    ASSERT_GE(rows.size(), 4u);
    auto value = [&](const profiler::KeyAverage& r) {
      const std::string k = key;
      return k == "cpu_time_total"           ? r.cpuTimeTotal
             : k == "self_cpu_time_total"    ? r.selfCpuTimeTotal
             : k == "device_time_total"      ? r.deviceTimeTotal
             : k == "self_device_time_total" ? r.selfDeviceTimeTotal
                                             : static_cast<double>(r.count);
    };
    for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(value(rows[i - 1]), value(rows[i])) << key << " row " << i;
    // The table lists the rows in that order.
    const std::string table = averages.table(key, 3);
    const size_t first = table.find(rows[0].name), second = table.find(rows[1].name, first + rows[0].name.size());
    EXPECT_NE(first, std::string::npos) << table;
    EXPECT_NE(second, std::string::npos) << table;
  }
  std::map<std::string, profiler::KeyAverage> byName;
  for (const profiler::KeyAverage& r : averages.rows()) byName[r.name] = r;
  EXPECT_EQ(byName.at("exp").count, 5);
  EXPECT_EQ(byName.at("compiled_call").count, 3);
  for (const auto& [name, r] : byName) EXPECT_LE(r.selfCpuTimeTotal, r.cpuTimeTotal + 1e-6) << name;
  // A compiled call's own time excludes the launches inside it, which carry its kernels' device time.
  EXPECT_LT(byName.at("compiled_call").selfCpuTimeTotal, byName.at("compiled_call").cpuTimeTotal);
  EXPECT_GT(byName.at("compiled_call").deviceTimeTotal, 0);
  EXPECT_NE(errorOf([&] { (void)averages.table("wall_time"); }).find("cannot sort by 'wall_time'"), std::string::npos);
}

TEST(Profiler, OneProfileAtATime) {
  Profile a(options());
  a.start();
  Profile b(options());
  EXPECT_NE(errorOf([&] { b.start(); }).find("another profile is active"), std::string::npos);
  a.stop();
  b.start();  // free again
  b.stop();
}

// Runs in the child process of WholeProgramTraceWithKilnProfile.
TEST(ProfilerEnv, ChildRuns) {
  if (!std::getenv("KILN_TEST_PROFILE_CHILD")) GTEST_SKIP() << "run by ProfilerEnv.WholeProgramTraceWithKilnProfile";
  Tensor x = ones({16});
  (void)(kiln::exp(x) + 2.0).toVector();
}

TEST(ProfilerEnv, WholeProgramTraceWithKilnProfile) {
  if (std::getenv("KILN_TEST_PROFILE_CHILD")) GTEST_SKIP() << "the child";
  const fs::path dir = fs::temp_directory_path() / ("kiln-profiler-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / "whole.json";
  fs::remove(path);
  const std::string command = "KILN_PROFILE=" + path.string() + " KILN_TEST_PROFILE_CHILD=1 " +
                              fs::read_symlink("/proc/self/exe").string() + " --gtest_filter=ProfilerEnv.ChildRuns > " +
                              path.string() + ".log 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << "the child failed; its output is in " << path << ".log";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "KILN_PROFILE wrote no trace";
  const json trace = json::parse(in);
  EXPECT_EQ(named(trace, "exp", "op").size(), 1u);
  EXPECT_EQ(named(trace, "add", "op").size(), 1u);
  EXPECT_TRUE(named(trace, "exp", "op").at(0).at("args").contains("Input Dims")) << "KILN_PROFILE records shapes";
  EXPECT_GT(pidOf(trace, "cpu"), 0);
  fs::remove_all(dir);
}

TEST(Profiler, OpenCLKernelsOnTheirStreamWithDeviceTimes) {
  const Device device = Device::opencl();
  std::string why;
  if (!runtime::isDeviceAvailable(device, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  Tensor x = fromVector({1, 2, 3, 4}).to(device);
  (void)kiln::exp(x).to(Device::cpu());  // compiled outside the profile
  Profile p(options());
  p.start();
  const int64_t before = runtime::kernelLaunchCount();
  Tensor y = kiln::exp(x);
  Tensor z = kiln::exp(y);
  const int64_t launched = runtime::kernelLaunchCount() - before;
  (void)z.to(Device::cpu());
  p.stop();
  const json trace = traceOf(p);
  const int pid = pidOf(trace, device.str());
  ASSERT_GT(pid, 0) << "no process for " << device.str();
  std::vector<json> kernels;
  for (const json& e : complete(trace))
    if (e.at("pid") == pid) kernels.push_back(e);
  EXPECT_EQ(static_cast<int64_t>(kernels.size()), launched);
  for (const json& k : kernels) {
    EXPECT_EQ(k.at("args").at("detail"), "device timed") << k.dump();
    EXPECT_GE(k.at("dur").get<double>(), 0);
  }
  for (size_t i = 1; i < kernels.size(); ++i)
    EXPECT_GE(ts(kernels[i]), endOf(kernels[i - 1]) - 1e-3) << "kernels on one stream overlap";
  // The move back to the host is an op of its own, with its bytes.
  const std::vector<json> moves = named(trace, "to", "op");
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].at("args").at("detail"), "16 bytes from opencl:0 to cpu");
}

}  // namespace
