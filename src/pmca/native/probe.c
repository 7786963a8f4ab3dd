/*
 * A tiny library that releases memory through libc on request.  coverage()
 * loads a fresh copy of it after the hooks are installed, to show that code
 * loaded later is caught, and unloads it to show that dlclose is not.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

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
