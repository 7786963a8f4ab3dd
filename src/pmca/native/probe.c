/*
 * A tiny library that releases memory through libc on request.  coverage()
 * loads a fresh copy of it after the hooks are installed, to show that code
 * loaded later is caught, and unloads it to show that dlclose is not.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

/* Map `length` bytes, touch them, unmap them; returns the address released,
 * or 0 if the mapping failed. */
__attribute__((visibility("default"))) uintptr_t pmca_probe_map_unmap(size_t length)
{
    void *memory = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return 0;
    *(volatile char *)memory = 1;
    if (munmap(memory, length) != 0)
        return 0;
    return (uintptr_t)memory;
}

/* `iterations` mmap+munmap cycles of `length` bytes, untouched, so that the
 * cost measured is the two calls (and any hook on them); returns how many
 * cycles failed. */
__attribute__((visibility("default"))) size_t pmca_probe_map_unmap_loop(size_t length,
                                                                        size_t iterations)
{
    size_t failures = 0;
    for (size_t i = 0; i < iterations; i++) {
        void *memory =
            mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED || munmap(memory, length) != 0)
            failures++;
    }
    return failures;
}

/* `iterations` malloc+free cycles with sizes from min_size doubling up to
 * max_size (then starting over); one byte of each block is written.  Blocks
 * above glibc's mmap threshold are mmap'ed and munmap'ed, smaller ones come
 * from the heap, whose top is trimmed (brk/madvise): both release paths. */
__attribute__((visibility("default"))) size_t pmca_probe_malloc_free_loop(size_t min_size,
                                                                          size_t max_size,
                                                                          size_t iterations)
{
    size_t failures = 0;
    size_t size = min_size;
    for (size_t i = 0; i < iterations; i++) {
        char *block = malloc(size);
        if (block == NULL) {
            failures++;
        } else {
            *(volatile char *)block = 1;
            free(block);
        }
        size = size >= max_size ? min_size : size * 2;
    }
    return failures;
}

struct release_worker {
    pthread_t thread;
    size_t length;
    volatile int *stop;
    uint64_t releases;
    uint64_t address_sum; /* wraps; compared modulo 2^64 */
    uint64_t failures;
};

static void *release_worker_main(void *argument)
{
    struct release_worker *worker = argument;
    while (!__atomic_load_n(worker->stop, __ATOMIC_RELAXED)) {
        void *memory = mmap(NULL, worker->length, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED) {
            worker->failures++;
            continue;
        }
        if (munmap(memory, worker->length) != 0) {
            worker->failures++;
            continue;
        }
        worker->releases++;
        worker->address_sum += (uint64_t)(uintptr_t)memory;
    }
    return NULL;
}

/* `threads` pthreads mmap+munmap `length` bytes as fast as they can for
 * `milliseconds`.  results[0] = munmaps done, results[1] = the sum of their
 * addresses (mod 2^64), results[2] = failed calls.  Returns 0, or -1 when a
 * thread could not be started. */
__attribute__((visibility("default"))) int pmca_probe_release_threads(int threads,
                                                                      size_t length,
                                                                      unsigned milliseconds,
                                                                      uint64_t *results)
{
    if (threads <= 0 || threads > 256)
        return -1;
    struct release_worker workers[256];
    volatile int stop = 0;
    int started = 0;
    for (; started < threads; started++) {
        workers[started] = (struct release_worker){.length = length, .stop = &stop};
        if (pthread_create(&workers[started].thread, NULL, release_worker_main,
                           &workers[started]) != 0)
            break;
    }
    if (started == threads) {
        struct timespec duration = {milliseconds / 1000u, (long)(milliseconds % 1000u) * 1000000L};
        while (nanosleep(&duration, &duration) != 0)
            ;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    results[0] = results[1] = results[2] = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(workers[i].thread, NULL);
        results[0] += workers[i].releases;
        results[1] += workers[i].address_sum;
        results[2] += workers[i].failures;
    }
    return started == threads ? 0 : -1;
}
