/* A stand-in for NVIDIA's libnvidia-ml.so.1 that the plugin's GPU health check loads through its
 * real dlopen path. Each GPU's health is scripted, one line per GPU, in the file that
 * $FAKE_NVML_SCRIPT names (read again at every call, so a test changes it between checks):
 *   ADDRESS ok              healthy
 *   ADDRESS lost            NVML_ERROR_GPU_IS_LOST from every call on it
 *   ADDRESS remap_failure   nvmlDeviceGetRemappedRows says a remapping failed
 *   ADDRESS ecc N           N volatile uncorrectable ECC errors
 *   ADDRESS xid N           XID N delivered once to each event set registered for it
 *   ADDRESS uuid GPU-...    the UUID nvmlDeviceGetUUID answers (a line of its own)
 * An address not listed is not an NVIDIA GPU NVML knows (NVML_ERROR_NOT_FOUND). With
 * $FAKE_NVML_INIT_FAIL set, nvmlInit_v2 fails as it does on a host without the driver. Only the
 * entry points the plugin uses are here, with nvml.h's signatures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_GPU_IS_LOST = 15,
};

#define MAX_GPUS 64

struct fake_gpu {
  char address[32];
  char state[32];
  unsigned long long value;
};

/* Handles stay valid for the process: one slot per address ever asked for. */
static struct fake_gpu gpus[MAX_GPUS];
static int gpu_count;

struct fake_set {
  int registered[MAX_GPUS];
  int delivered[MAX_GPUS];
};

typedef struct {
  void* device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} fake_event_data;

/* The script's line for `address`: 1 and its state, or 0. */
static int scripted(const char* address, char* state, unsigned long long* value) {
  const char* path = getenv("FAKE_NVML_SCRIPT");
  if (path == NULL) return 0;
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  char line[256];
  int found = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    char addr[64] = "";
    char word[32] = "";
    unsigned long long n = 0;
    if (sscanf(line, "%63s %31s %llu", addr, word, &n) < 2 || addr[0] == '#') continue;
    if (strcmp(word, "uuid") == 0) continue;
    if (strcasecmp(addr, address) == 0) {
      snprintf(state, 32, "%s", word);
      *value = n;
      found = 1;
    }
  }
  fclose(f);
  return found;
}

static struct fake_gpu* refresh(struct fake_gpu* g) {
  if (!scripted(g->address, g->state, &g->value)) snprintf(g->state, sizeof g->state, "%s", "gone");
  return g;
}

static int is(const struct fake_gpu* g, const char* state) { return strcmp(g->state, state) == 0; }

int nvmlInit_v2(void) {
  return getenv("FAKE_NVML_INIT_FAIL") != NULL ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_SUCCESS;
}

int nvmlShutdown(void) { return NVML_SUCCESS; }

const char* nvmlErrorString(int result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  if (bus_id == NULL || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  char state[32];
  unsigned long long value = 0;
  if (!scripted(bus_id, state, &value)) return NVML_ERROR_NOT_FOUND;
  if (strcmp(state, "lost") == 0) return NVML_ERROR_GPU_IS_LOST;
  for (int i = 0; i < gpu_count; ++i) {
    if (strcasecmp(gpus[i].address, bus_id) == 0) {
      *device = &gpus[i];
      return NVML_SUCCESS;
    }
  }
  if (gpu_count == MAX_GPUS) return NVML_ERROR_NOT_FOUND;
  snprintf(gpus[gpu_count].address, sizeof gpus[gpu_count].address, "%s", bus_id);
  *device = &gpus[gpu_count++];
  return NVML_SUCCESS;
}

/* The UUID a line "ADDRESS uuid GPU-..." gives, else GPU-fake-ADDRESS. */
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  struct fake_gpu* g = refresh(device);
  if (is(g, "lost")) return NVML_ERROR_GPU_IS_LOST;
  snprintf(uuid, length, "GPU-fake-%s", g->address);
  const char* path = getenv("FAKE_NVML_SCRIPT");
  FILE* f = path != NULL ? fopen(path, "r") : NULL;
  if (f == NULL) return NVML_SUCCESS;
  char line[256];
  while (fgets(line, sizeof line, f) != NULL) {
    char addr[64] = "";
    char word[32] = "";
    char value[96] = "";
    if (sscanf(line, "%63s %31s %95s", addr, word, value) == 3 && strcmp(word, "uuid") == 0 &&
        strcasecmp(addr, g->address) == 0) {
      snprintf(uuid, length, "%s", value);
    }
  }
  fclose(f);
  return NVML_SUCCESS;
}

int nvmlDeviceGetRemappedRows(void* device, unsigned* corr, unsigned* unc, unsigned* pending,
                              unsigned* failure) {
  struct fake_gpu* g = refresh(device);
  if (is(g, "lost")) return NVML_ERROR_GPU_IS_LOST;
  *corr = 0;
  *unc = is(g, "remap_failure") ? 8 : 0;
  *pending = 0;
  *failure = is(g, "remap_failure") ? 1 : 0;
  return NVML_SUCCESS;
}

int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                unsigned long long* count) {
  struct fake_gpu* g = refresh(device);
  if (is(g, "lost")) return NVML_ERROR_GPU_IS_LOST;
  /* NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC */
  *count = error_type == 1 && counter_type == 0 && is(g, "ecc") ? g->value : 0;
  return NVML_SUCCESS;
}

int nvmlEventSetCreate(void** set) {
  *set = calloc(1, sizeof(struct fake_set));
  return *set != NULL ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void* set) {
  (void)types;
  struct fake_set* s = set;
  s->registered[(struct fake_gpu*)device - gpus] = 1;
  return NVML_SUCCESS;
}

int nvmlEventSetWait_v2(void* set, fake_event_data* data, unsigned timeout_ms) {
  (void)timeout_ms;
  struct fake_set* s = set;
  for (int i = 0; i < gpu_count; ++i) {
    if (!s->registered[i] || s->delivered[i] || !is(refresh(&gpus[i]), "xid")) continue;
    s->delivered[i] = 1;
    memset(data, 0, sizeof *data);
    data->device = &gpus[i];
    data->eventType = 0x8ULL; /* nvmlEventTypeXidCriticalError */
    data->eventData = gpus[i].value;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_TIMEOUT;
}

int nvmlEventSetFree(void* set) {
  free(set);
  return NVML_SUCCESS;
}
