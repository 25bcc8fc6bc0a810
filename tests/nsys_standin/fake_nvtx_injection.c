/* An NVTX injection library for the nsys stand-in, loaded by NVTX through NVTX_INJECTION64_PATH as Nsight
 * Systems' own is. It fills NVTX's CORE and CORE2 callback tables and appends one JSON line per event to
 * $NRLPROF_STANDIN_NVTX_DIR/nvtx-<pid>.jsonl: {"t": CLOCK_MONOTONIC ns, "pid", "tid", "ev", "domain", "msg", "id"}.
 * ev is domain | push | pop | start | end | mark. Self-contained: the NVTX ABI it needs is declared here. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

typedef void (*NvtxFunctionPointer)(void);
typedef NvtxFunctionPointer **NvtxFunctionTable;
typedef struct {
    size_t struct_size;
    int (*GetModuleFunctionTable)(int module, NvtxFunctionTable *out_table, unsigned int *out_size);
} NvtxExportTableCallbacks;
typedef const void *(*NvtxGetExportTableFunc_t)(uint32_t export_table_id);

enum { ETID_CALLBACKS = 1, MODULE_CORE = 1, MODULE_CORE2 = 5 };
enum { MESSAGE_ASCII = 1, MESSAGE_UNICODE = 2, MESSAGE_REGISTERED = 3 };

typedef struct {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType;
    int32_t reserved0;
    union {
        uint64_t ullValue;
        int64_t llValue;
        double dValue;
    } payload;
    int32_t messageType;
    union {
        const char *ascii;
        const wchar_t *unicode;
        const void *registered;
    } message;
} EventAttributes;

typedef struct {
    char *name;
} Domain;
typedef struct {
    char *text;
} RegisteredString;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int out_fd = -1;
static pid_t out_pid = 0;
static uint64_t next_range_id = 0;

static long long monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

/* The events file of this process; reopened after fork. */
static int events_fd(void) {
    pid_t pid = getpid();
    pthread_mutex_lock(&lock);
    if (out_pid != pid) {
        const char *dir = getenv("NRLPROF_STANDIN_NVTX_DIR");
        out_fd = -1;
        if (dir != NULL && *dir != '\0') {
            char path[4096];
            snprintf(path, sizeof path, "%s/nvtx-%d.jsonl", dir, (int)pid);
            out_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        }
        out_pid = pid;
    }
    int fd = out_fd;
    pthread_mutex_unlock(&lock);
    return fd;
}

static size_t append_json_string(char *out, size_t at, size_t limit, const char *text) {
    if (text == NULL) {
        at += (size_t)snprintf(out + at, at < limit ? limit - at : 0, "null");
        return at;
    }
    if (at < limit) out[at] = '"';
    at++;
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0' && at + 8 < limit; c++) {
        if (*c == '"' || *c == '\\') {
            out[at++] = '\\';
            out[at++] = (char)*c;
        } else if (*c < 0x20) {
            at += (size_t)snprintf(out + at, limit - at, "\\u%04x", *c);
        } else {
            out[at++] = (char)*c;
        }
    }
    if (at < limit) out[at] = '"';
    return at + 1;
}

static void emit(const char *event, const Domain *domain, const char *message, uint64_t id) {
    int fd = events_fd();
    if (fd < 0) return;
    char line[8192];
    const size_t limit = sizeof line - 4;
    size_t at = (size_t)snprintf(line, limit, "{\"t\":%lld,\"pid\":%d,\"tid\":%ld,\"ev\":\"%s\",\"id\":%llu,\"domain\":",
                                 monotonic_ns(), (int)getpid(), (long)syscall(SYS_gettid), event,
                                 (unsigned long long)id);
    at = append_json_string(line, at, limit, domain == NULL ? NULL : domain->name);
    at += (size_t)snprintf(line + at, limit - at, ",\"msg\":");
    at = append_json_string(line, at, limit, message);
    if (at > limit) at = limit;
    line[at++] = '}';
    line[at++] = '\n';
    ssize_t ignored = write(fd, line, at);
    (void)ignored;
}

static const char *message_of(const EventAttributes *attributes, char *buffer, size_t size) {
    if (attributes == NULL) return "";
    switch (attributes->messageType) {
    case MESSAGE_ASCII:
        return attributes->message.ascii == NULL ? "" : attributes->message.ascii;
    case MESSAGE_REGISTERED:
        return attributes->message.registered == NULL ? "" : ((const RegisteredString *)attributes->message.registered)->text;
    case MESSAGE_UNICODE:
        if (attributes->message.unicode == NULL || wcstombs(buffer, attributes->message.unicode, size - 1) == (size_t)-1)
            return "";
        buffer[size - 1] = '\0';
        return buffer;
    default:
        return "";
    }
}

#define MESSAGE(attributes) message_of((attributes), unicode_buffer, sizeof unicode_buffer)

static uint64_t new_range_id(void) { return __atomic_add_fetch(&next_range_id, 1, __ATOMIC_RELAXED); }

/* CORE2: domain API (what the nvtx Python package calls). */
static void domain_mark_ex(const Domain *domain, const EventAttributes *attributes) {
    char unicode_buffer[1024];
    emit("mark", domain, MESSAGE(attributes), 0);
}
static uint64_t domain_range_start_ex(const Domain *domain, const EventAttributes *attributes) {
    char unicode_buffer[1024];
    uint64_t id = new_range_id();
    emit("start", domain, MESSAGE(attributes), id);
    return id;
}
static void domain_range_end(const Domain *domain, uint64_t id) { emit("end", domain, NULL, id); }
static int domain_range_push_ex(const Domain *domain, const EventAttributes *attributes) {
    char unicode_buffer[1024];
    emit("push", domain, MESSAGE(attributes), 0);
    return 0;
}
static int domain_range_pop(const Domain *domain) {
    emit("pop", domain, NULL, 0);
    return 0;
}
static void *domain_resource_create(const Domain *domain, const void *attributes) {
    (void)domain;
    (void)attributes;
    return malloc(1);
}
static void domain_resource_destroy(void *resource) { free(resource); }
static void domain_name_category(const Domain *domain, uint32_t category, const void *name) {
    (void)domain;
    (void)category;
    (void)name;
}
static const RegisteredString *domain_register_string(const Domain *domain, const char *text) {
    (void)domain;
    RegisteredString *handle = malloc(sizeof *handle);
    if (handle != NULL) handle->text = strdup(text == NULL ? "" : text);
    return handle;
}
static const RegisteredString *domain_register_string_w(const Domain *domain, const wchar_t *text) {
    (void)domain;
    (void)text;
    return domain_register_string(domain, "");
}
static Domain *domain_create(const char *name) {
    Domain *domain = malloc(sizeof *domain);
    if (domain == NULL) return NULL;
    domain->name = strdup(name == NULL ? "" : name);
    emit("domain", domain, domain->name, 0);
    return domain;
}
static Domain *domain_create_w(const wchar_t *name) {
    (void)name;
    return domain_create("");
}
static void domain_destroy(Domain *domain) { (void)domain; /* handles may still be in use by other threads */ }
static void initialize(const void *reserved) { (void)reserved; }

/* CORE: the default domain. */
static void mark_ex(const EventAttributes *attributes) { domain_mark_ex(NULL, attributes); }
static void mark_a(const char *message) { emit("mark", NULL, message, 0); }
static uint64_t range_start_ex(const EventAttributes *attributes) { return domain_range_start_ex(NULL, attributes); }
static uint64_t range_start_a(const char *message) {
    uint64_t id = new_range_id();
    emit("start", NULL, message, id);
    return id;
}
static void range_end(uint64_t id) { emit("end", NULL, NULL, id); }
static int range_push_ex(const EventAttributes *attributes) { return domain_range_push_ex(NULL, attributes); }
static int range_push_a(const char *message) {
    emit("push", NULL, message, 0);
    return 0;
}
static int range_pop(void) { return domain_range_pop(NULL); }
static void name_any(uint32_t id, const void *name) {
    (void)id;
    (void)name;
}

static void fill(const NvtxExportTableCallbacks *callbacks, int module, const NvtxFunctionPointer *functions,
                 unsigned int count) {
    NvtxFunctionTable table = NULL;
    unsigned int last = 0;
    if (!callbacks->GetModuleFunctionTable(module, &table, &last) || table == NULL) return;
    for (unsigned int id = 1; id < count && id <= last; id++)
        if (functions[id] != NULL && table[id] != NULL) *table[id] = functions[id];
}

#define FN(f) ((NvtxFunctionPointer)(f))

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    const NvtxExportTableCallbacks *callbacks = get_export_table(ETID_CALLBACKS);
    if (callbacks == NULL) return 0;
    const NvtxFunctionPointer core[] = {
        NULL,          FN(mark_ex),          FN(mark_a),   NULL,          FN(range_start_ex), FN(range_start_a),
        NULL,          FN(range_end),        FN(range_push_ex), FN(range_push_a), NULL, FN(range_pop),
        FN(name_any),  NULL,                 FN(name_any), NULL,
    };
    const NvtxFunctionPointer core2[] = {
        NULL,
        FN(domain_mark_ex),
        FN(domain_range_start_ex),
        FN(domain_range_end),
        FN(domain_range_push_ex),
        FN(domain_range_pop),
        FN(domain_resource_create),
        FN(domain_resource_destroy),
        FN(domain_name_category),
        FN(domain_name_category),
        FN(domain_register_string),
        FN(domain_register_string_w),
        FN(domain_create),
        FN(domain_create_w),
        FN(domain_destroy),
        FN(initialize),
    };
    fill(callbacks, MODULE_CORE, core, sizeof core / sizeof core[0]);
    fill(callbacks, MODULE_CORE2, core2, sizeof core2 / sizeof core2[0]);
    return 1;
}
