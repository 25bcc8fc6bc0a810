/* A CUDA runtime stand-in for the nsys stand-in: cudaProfilerStart/Stop ask the stand-in to open or close a
 * capture range over the Unix socket named by NRLPROF_STANDIN_SOCKET and return the stand-in's answer, so
 * cudaProfilerStop blocks while the "report" is written, as under real Nsight Systems. Without that variable
 * (no profiler attached) both return cudaSuccess and do nothing, as the real runtime does.
 * The runtime reports one device, so callers treat it as a CUDA runtime under a profiler. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { cudaSuccess = 0, cudaErrorUnknown = 999 };

static long long monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static int write_all(int fd, const char *data, size_t length) {
    while (length > 0) {
        ssize_t written = write(fd, data, length);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return -1;
        data += written;
        length -= (size_t)written;
    }
    return 0;
}

static int ask_stand_in(const char *verb) {
    const char *path = getenv("NRLPROF_STANDIN_SOCKET");
    if (path == NULL || *path == '\0') return cudaSuccess;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return cudaErrorUnknown;
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    int rc;
    do {
        rc = connect(fd, (struct sockaddr *)&address, sizeof address);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        close(fd);
        return cudaErrorUnknown;
    }
    char line[160];
    int length = snprintf(line, sizeof line, "%s %d %ld %lld\n", verb, (int)getpid(), (long)syscall(SYS_gettid),
                          monotonic_ns());
    char answer[32] = {0};
    size_t got = 0;
    if (write_all(fd, line, (size_t)length) == 0) {
        while (got < sizeof answer - 1 && memchr(answer, '\n', got) == NULL) {
            ssize_t n = read(fd, answer + got, sizeof answer - 1 - got);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            got += (size_t)n;
        }
    }
    close(fd);
    if (memchr(answer, '\n', got) == NULL) return cudaErrorUnknown;
    return atoi(answer);
}

int cudaProfilerStart(void) { return ask_stand_in("start"); }
int cudaProfilerStop(void) { return ask_stand_in("stop"); }

int cudaGetDeviceCount(int *count) {
    if (count != NULL) *count = 1;
    return cudaSuccess;
}
int cudaRuntimeGetVersion(int *version) {
    if (version != NULL) *version = 13000;
    return cudaSuccess;
}
int cudaDriverGetVersion(int *version) {
    if (version != NULL) *version = 13000;
    return cudaSuccess;
}
int cudaGetLastError(void) { return cudaSuccess; }
int cudaPeekAtLastError(void) { return cudaSuccess; }
int cudaDeviceSynchronize(void) { return cudaSuccess; }
const char *cudaGetErrorString(int error) { return error == cudaSuccess ? "no error" : "nsys stand-in error"; }
/* Lets a caller tell this runtime from a real one. */
const char *nrlprofStandInRuntime(void) { return "nrlprof nsys stand-in"; }
