/* btl/sm single copy between address spaces. */
#include "sm.h"

/* Single copy between address spaces (CMA).  `write` 0 reads `length`
 * bytes at `remote` in process `pid` into `local`; 1 writes `local` there.
 * Returns the bytes moved (== length) or a negative errno (-EPERM/-EACCES
 * when the kernel refuses, -ESRCH when the process is gone, -EFAULT for a
 * bad range). */
EXPORT int64_t pmca_sm_cma(int32_t pid, int write, uint64_t local, uint64_t remote, uint64_t length)
{
    uint64_t done = 0;
    while (done < length) {
        struct iovec here = {(void *)(uintptr_t)(local + done), length - done};
        struct iovec there = {(void *)(uintptr_t)(remote + done), length - done};
        ssize_t moved = write ? process_vm_writev(pid, &here, 1, &there, 1, 0)
                              : process_vm_readv(pid, &here, 1, &there, 1, 0);
        if (moved < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (moved == 0)
            return -EFAULT;
        done += (uint64_t)moved;
    }
    return (int64_t)done;
}
