/* A stand-in for libnvidia-ml.so.1, so that the tests of runtime/nvml.h
 * exercise the whole path — loading, every query, the retry of a process
 * list that outgrew its buffer, fields a GPU does not support, /proc names —
 * on machines without an NVIDIA driver. Its types follow NVML's documented
 * ABI (nvml.h), as runtime/nvml.cpp's do; it checks kiln's logic, not that
 * ABI, which only a real driver can (tests/gpu).
 *
 * Two GPUs. GPU 0: every field, two processes (this process, and a PID
 * that cannot exist, whose memory NVML does not know). GPU 1: no
 * temperature or power sensor, eleven processes (more than kiln's first
 * buffer holds). FAKE_NVML_FAIL_INIT=1 makes nvmlInit_v2 fail as it does
 * when the driver is not loaded. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  unsigned long long total, free, used;
} Memory;
typedef struct {
  unsigned gpu, memory;
} Utilization;
typedef struct {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
} ProcessInfo;

enum { SUCCESS = 0, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, INSUFFICIENT_SIZE = 7, DRIVER_NOT_LOADED = 9 };
static int gpus[2];

static int copy(char* out, unsigned length, const char* text) {
  if (strlen(text) + 1 > length) return INSUFFICIENT_SIZE;
  strcpy(out, text);
  return SUCCESS;
}
static int index_of(void* device) { return device == &gpus[0] ? 0 : device == &gpus[1] ? 1 : -1; }

int nvmlInit_v2(void) {
  const char* fail = getenv("FAKE_NVML_FAIL_INIT");
  return fail && *fail == '1' ? DRIVER_NOT_LOADED : SUCCESS;
}
const char* nvmlErrorString(int result) {
  return result == DRIVER_NOT_LOADED ? "Driver Not Loaded" : result == NOT_SUPPORTED ? "Not Supported" : "Unknown";
}
int nvmlSystemGetDriverVersion(char* version, unsigned length) { return copy(version, length, "580.95.05"); }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 2;
  return SUCCESS;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index > 1) return INVALID_ARGUMENT;
  *device = &gpus[index];
  return SUCCESS;
}
int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  return copy(name, length, index_of(device) == 0 ? "Fake GPU Zero" : "Fake GPU One");
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  return copy(uuid, length, index_of(device) == 0 ? "GPU-00000000-fake" : "GPU-11111111-fake");
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  memory->total = 80ull << 30;
  memory->used = index_of(device) == 0 ? 3ull << 30 : 0;
  memory->free = memory->total - memory->used;
  return SUCCESS;
}
int nvmlDeviceGetUtilizationRates(void* device, Utilization* u) {
  u->gpu = index_of(device) == 0 ? 37 : 0;
  u->memory = index_of(device) == 0 ? 12 : 0;
  return SUCCESS;
}
int nvmlDeviceGetTemperature(void* device, int sensor, unsigned* celsius) {
  if (index_of(device) != 0 || sensor != 0) return NOT_SUPPORTED;
  *celsius = 45;
  return SUCCESS;
}
int nvmlDeviceGetPowerUsage(void* device, unsigned* milliwatts) {
  if (index_of(device) != 0) return NOT_SUPPORTED;
  *milliwatts = 123456;
  return SUCCESS;
}
int nvmlDeviceGetEnforcedPowerLimit(void* device, unsigned* milliwatts) {
  if (index_of(device) != 0) return NOT_SUPPORTED;
  *milliwatts = 700000;
  return SUCCESS;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned* count, ProcessInfo* infos) {
  const unsigned n = index_of(device) == 0 ? 2 : 11;
  if (*count < n) {
    *count = n;
    return INSUFFICIENT_SIZE;
  }
  *count = n;
  for (unsigned i = 0; i < n; ++i) {
    memset(&infos[i], 0, sizeof infos[i]);
    infos[i].pid = (unsigned)getpid();
    infos[i].usedGpuMemory = (unsigned long long)(i + 1) << 20;
  }
  if (index_of(device) == 0) {
    infos[0].usedGpuMemory = 512ull << 20;
    infos[1].pid = 999999999u;      /* above Linux's pid_max: no such process */
    infos[1].usedGpuMemory = ~0ull; /* NVML_VALUE_NOT_AVAILABLE */
  }
  return SUCCESS;
}
