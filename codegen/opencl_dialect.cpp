// The OpenCL C dialect of the C-family renderer (codegen/c_dialect.h):
// OpenCL C 1.2, the version PoCL 3.1 compiles. `__kernel` functions with
// reqd_work_group_size, `__global ... restrict` buffers offset in the kernel
// by an element offset from the args struct (a cl_mem cannot be offset on
// the host without an aligned sub-buffer), get_group_id/get_local_id,
// barrier(CLK_LOCAL_MEM_FENCE), `__local` arrays, as_T bit casts, the
// overloaded sqrt and rint, vload4/vstore4 (aligned to the element only, so
// no run-time alignment check), and a local-memory tree for reductions
// (no subgroups on PoCL). Every kernel turns FP contraction off: OpenCL
// compilers contract a*b+c into an FMA by default, which changes bits
// (Note [Eager equals compiled]); codegen/opencl_compiler.h adds
// -cl-fp32-correctly-rounded-divide-sqrt.
#include <fmt/format.h>

#include "codegen/c_dialect.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {

class OpenCLDialect final : public CDialect {
 public:
  std::string_view name() const override { return "opencl"; }

  const char* i64() const override { return "long"; }
  const char* u64() const override { return "ulong"; }
  const char* u32() const override { return "uint"; }
  const char* u16() const override { return "ushort"; }
  const char* u8() const override { return "uchar"; }
  const char* i64Suffix() const override { return "L"; }
  const char* u64Suffix() const override { return "UL"; }

  std::string bitcast(CBits, CBits to, const std::string& expr) const override {
    return fmt::format("as_{}({})", bitsTypeName(to, "long"), expr);
  }
  // Overloaded on float and double; correctly rounded with the build options.
  std::string sqrt(DType, const std::string& arg) const override { return fmt::format("sqrt({})", arg); }
  std::string rint(DType, const std::string& arg) const override { return fmt::format("rint({})", arg); }

  // fp64 is an extension in OpenCL C 1.2; kernels without double compile
  // without it.
  std::string preamble() const override {
    return "#pragma OPENCL FP_CONTRACT OFF\n"
           "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n";
  }
  std::string kernelHead(int requiredLocalSize) const override {
    if (requiredLocalSize <= 0) return "__kernel void ";
    return fmt::format("__kernel __attribute__((reqd_work_group_size({}, 1, 1))) void ", requiredLocalSize);
  }
  std::string bufferParam(const std::string& storageType, bool output, int p) const override {
    return fmt::format("__global {}{}* restrict p{}", output ? "" : "const ", storageType, p);
  }
  bool offsetsInArgs() const override { return true; }
  const char* helperPrefix() const override { return "static inline"; }

  std::string globalId() const override { return "(long)get_global_id(0)"; }
  std::string globalSize() const override { return "(long)get_global_size(0)"; }
  std::string groupId() const override { return "(long)get_group_id(0)"; }
  std::string numGroups() const override { return "(long)get_num_groups(0)"; }
  std::string localId() const override { return "(int)get_local_id(0)"; }
  std::string localSize() const override { return "(int)get_local_size(0)"; }
  std::string barrier() const override { return "barrier(CLK_LOCAL_MEM_FENCE);"; }
  std::string localArray(const std::string& type, const std::string& name, int count) const override {
    return fmt::format("__local {} {}[{}];", type, name, count);
  }

  bool vectorsNeedAlignment() const override { return false; }
  std::string vectorTypeDecl(DType, const std::string&) const override { return ""; }
  // float4, double4, int4, long4, ushort4 (f16, bf16), uchar4 (bool).
  std::string vectorType(DType, const std::string& storageType) const override { return storageType + "4"; }
  std::string vectorLoad(DType, const std::string&, const std::string& pointer) const override {
    return fmt::format("vload4(0, {})", pointer);
  }
  std::string vectorStore(DType, const std::string&, const std::string& pointer,
                          const std::string& value) const override {
    return fmt::format("vstore4({}, 0, {});", value, pointer);
  }
  std::string vectorLane(const std::string& value, int lane) const override {
    return fmt::format("{}.s{}", value, lane);
  }

  CReductionTree reductionTree() const override { return CReductionTree::localTree; }
  std::string shuffleDown(const std::string&, const std::string&) const override {
    KILN_ASSERT(false, "OpenCL C has no warp shuffles on the devices kiln targets");
    return "";
  }
};

}  // namespace

const CDialect& openclDialect() {
  static const OpenCLDialect dialect;
  return dialect;
}

}  // namespace kiln::codegen
