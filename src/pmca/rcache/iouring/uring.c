/*
 * Really pinned registrations without RDMA hardware: io_uring registered
 * buffers.
 *
 * Registering a buffer makes the kernel pin the pages behind its range
 * (pin_user_pages with FOLL_LONGTERM, as ibv_reg_mr does) and remember those
 * pages, not the address.  An operation on a registered buffer
 * (IORING_OP_WRITE_FIXED, IORING_OP_SEND_ZC with IORING_RECVSEND_FIXED_BUF)
 * uses the address only to compute an offset into the pinned pages: if the
 * range was unmapped and something else mapped there since, the operation
 * still moves the old pages' bytes.  That is the stale-registration hazard
 * of RDMA, on any Linux >= 5.19.
 *
 * The table is registered sparse (IORING_REGISTER_BUFFERS2) and filled one
 * slot at a time (IORING_REGISTER_BUFFERS_UPDATE).  One request is in flight
 * at a time per ring (a mutex serialises submit-and-wait); the point here is
 * correctness, and a transport that wants more opens more rings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#if __has_include(<linux/io_uring.h>) && defined(__NR_io_uring_setup)
#include <linux/io_uring.h>
#define HAVE_IO_URING 1
#else
#define HAVE_IO_URING 0
#endif

struct pmca_uring;

#if HAVE_IO_URING

struct pmca_uring {
    int fd;
    unsigned table_size;
    pthread_mutex_t lock;
    uint64_t next_id;
    void *sq_ring, *cq_ring;
    size_t sq_ring_size, cq_ring_size;
    struct io_uring_sqe *sqes;
    size_t sqes_size;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_cqe *cqes;
};

static int sys_setup(unsigned entries, struct io_uring_params *p)
{
    return (int)syscall(__NR_io_uring_setup, entries, p);
}

static int sys_enter(int fd, unsigned submit, unsigned wait, unsigned flags)
{
    return (int)syscall(__NR_io_uring_enter, fd, submit, wait, flags, NULL, 0);
}

static int sys_register(int fd, unsigned op, void *arg, unsigned nr)
{
    return (int)syscall(__NR_io_uring_register, fd, op, arg, nr);
}

static void unmap_rings(struct pmca_uring *r)
{
    if (r->sqes != NULL && r->sqes != MAP_FAILED)
        munmap(r->sqes, r->sqes_size);
    if (r->cq_ring != NULL && r->cq_ring != MAP_FAILED && r->cq_ring != r->sq_ring)
        munmap(r->cq_ring, r->cq_ring_size);
    if (r->sq_ring != NULL && r->sq_ring != MAP_FAILED)
        munmap(r->sq_ring, r->sq_ring_size);
}

EXPORT struct pmca_uring *pmca_uring_open(unsigned entries, unsigned table_size, int *error)
{
    struct io_uring_params p;
    struct pmca_uring *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        *error = ENOMEM;
        return NULL;
    }
    memset(&p, 0, sizeof(p));
    r->fd = sys_setup(entries, &p);
    if (r->fd < 0) {
        *error = errno;
        free(r);
        return NULL;
    }
    r->sq_ring_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_ring_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (p.features & IORING_FEAT_SINGLE_MMAP) {
        if (r->cq_ring_size > r->sq_ring_size)
            r->sq_ring_size = r->cq_ring_size;
        r->cq_ring_size = r->sq_ring_size;
    }
    r->sq_ring = mmap(NULL, r->sq_ring_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                      r->fd, IORING_OFF_SQ_RING);
    if (r->sq_ring == MAP_FAILED)
        goto fail;
    if (p.features & IORING_FEAT_SINGLE_MMAP)
        r->cq_ring = r->sq_ring;
    else
        r->cq_ring = mmap(NULL, r->cq_ring_size, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    if (r->cq_ring == MAP_FAILED)
        goto fail;
    r->sqes_size = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(NULL, r->sqes_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
                   IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED)
        goto fail;
    r->sq_head = (unsigned *)((char *)r->sq_ring + p.sq_off.head);
    r->sq_tail = (unsigned *)((char *)r->sq_ring + p.sq_off.tail);
    r->sq_mask = (unsigned *)((char *)r->sq_ring + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)((char *)r->sq_ring + p.sq_off.array);
    r->cq_head = (unsigned *)((char *)r->cq_ring + p.cq_off.head);
    r->cq_tail = (unsigned *)((char *)r->cq_ring + p.cq_off.tail);
    r->cq_mask = (unsigned *)((char *)r->cq_ring + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)((char *)r->cq_ring + p.cq_off.cqes);

    struct io_uring_rsrc_register reg;
    memset(&reg, 0, sizeof(reg));
    reg.nr = table_size;
    reg.flags = IORING_RSRC_REGISTER_SPARSE;
    if (sys_register(r->fd, IORING_REGISTER_BUFFERS2, &reg, sizeof(reg)) < 0)
        goto fail;
    r->table_size = table_size;
    pthread_mutex_init(&r->lock, NULL);
    return r;
fail:
    *error = errno;
    unmap_rings(r);
    close(r->fd);
    free(r);
    return NULL;
}

EXPORT void pmca_uring_close(struct pmca_uring *r)
{
    if (r == NULL)
        return;
    unmap_rings(r);
    close(r->fd); /* unpins every registered buffer */
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static int update_slot(struct pmca_uring *r, unsigned index, void *base, size_t len)
{
    struct iovec iov = {base, len};
    struct io_uring_rsrc_update2 up;
    if (index >= r->table_size)
        return -EINVAL;
    memset(&up, 0, sizeof(up));
    up.offset = index;
    up.data = (uint64_t)(uintptr_t)&iov;
    up.nr = 1;
    int rc = sys_register(r->fd, IORING_REGISTER_BUFFERS_UPDATE, &up, sizeof(up));
    if (rc < 0)
        return -errno;
    return rc == 1 ? 0 : -EIO;
}

/* Pin [base, base + len) into slot `index`: 0 or -errno (ENOMEM, EFAULT, EOPNOTSUPP...). */
EXPORT int pmca_uring_register(struct pmca_uring *r, unsigned index, void *base, size_t len)
{
    if (base == NULL || len == 0)
        return -EINVAL;
    return update_slot(r, index, base, len);
}

/* Unpin slot `index`. */
EXPORT int pmca_uring_unregister(struct pmca_uring *r, unsigned index)
{
    return update_slot(r, index, NULL, 0);
}

static struct io_uring_sqe *next_sqe(struct pmca_uring *r)
{
    unsigned tail = *r->sq_tail;
    unsigned idx = tail & *r->sq_mask;
    struct io_uring_sqe *sqe = &r->sqes[idx];
    memset(sqe, 0, sizeof(*sqe));
    r->sq_array[idx] = idx;
    return sqe;
}

static void publish_sqe(struct pmca_uring *r)
{
    __atomic_store_n(r->sq_tail, *r->sq_tail + 1, __ATOMIC_RELEASE);
}

/* Wait for the next CQE of request `id`; copies it out. */
static int wait_cqe(struct pmca_uring *r, uint64_t id, struct io_uring_cqe *out, int submit)
{
    for (;;) {
        unsigned head = *r->cq_head;
        if (head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
            struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];
            int mine = cqe->user_data == id;
            if (mine)
                *out = *cqe;
            __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
            if (mine)
                return 0;
            continue;
        }
        int rc = sys_enter(r->fd, submit, 1, IORING_ENTER_GETEVENTS);
        if (rc < 0 && errno != EINTR)
            return -errno;
        if (rc >= 0)
            submit = 0;
    }
}

static long rw_fixed(struct pmca_uring *r, int opcode, int fd, void *addr, size_t len,
                     uint64_t offset, unsigned index)
{
    struct io_uring_cqe cqe;
    if (len > UINT32_MAX)
        return -EINVAL; /* sqe->len is 32 bits: never shorten a transfer silently */
    pthread_mutex_lock(&r->lock);
    uint64_t id = ++r->next_id;
    struct io_uring_sqe *sqe = next_sqe(r);
    sqe->opcode = (uint8_t)opcode;
    sqe->fd = fd;
    sqe->addr = (uint64_t)(uintptr_t)addr;
    sqe->len = (uint32_t)len;
    sqe->off = offset;
    sqe->buf_index = (uint16_t)index;
    sqe->user_data = id;
    publish_sqe(r);
    int rc = wait_cqe(r, id, &cqe, 1);
    pthread_mutex_unlock(&r->lock);
    return rc < 0 ? rc : cqe.res;
}

/* write(fd) from registered buffer `index`: bytes written or -errno. */
EXPORT long pmca_uring_write_fixed(struct pmca_uring *r, int fd, void *addr, size_t len,
                                   uint64_t offset, unsigned index)
{
    return rw_fixed(r, IORING_OP_WRITE_FIXED, fd, addr, len, offset, index);
}

/* read(fd) into registered buffer `index`: bytes read or -errno. */
EXPORT long pmca_uring_read_fixed(struct pmca_uring *r, int fd, void *addr, size_t len,
                                  uint64_t offset, unsigned index)
{
    return rw_fixed(r, IORING_OP_READ_FIXED, fd, addr, len, offset, index);
}

/*
 * Zero-copy send from registered buffer `index` on a socket: bytes sent or
 * -errno.  Returns once the kernel has let go of the pages (the
 * notification CQE), so the caller may reuse the buffer.
 */
EXPORT long pmca_uring_send_zc_fixed(struct pmca_uring *r, int fd, void *addr, size_t len,
                                     unsigned index, int msg_flags)
{
    struct io_uring_cqe cqe;
    if (len > UINT32_MAX)
        return -EINVAL; /* sqe->len is 32 bits */
    pthread_mutex_lock(&r->lock);
    uint64_t id = ++r->next_id;
    struct io_uring_sqe *sqe = next_sqe(r);
    sqe->opcode = IORING_OP_SEND_ZC;
    sqe->fd = fd;
    sqe->addr = (uint64_t)(uintptr_t)addr;
    sqe->len = (uint32_t)len;
    sqe->msg_flags = (uint32_t)msg_flags;
    sqe->ioprio = IORING_RECVSEND_FIXED_BUF;
    sqe->buf_index = (uint16_t)index;
    sqe->user_data = id;
    publish_sqe(r);
    long result;
    int rc = wait_cqe(r, id, &cqe, 1);
    result = rc < 0 ? rc : cqe.res;
    /* IORING_CQE_F_MORE: a notification CQE follows when the pages are free */
    while (rc == 0 && (cqe.flags & IORING_CQE_F_MORE)) {
        rc = wait_cqe(r, id, &cqe, 0);
        if (rc < 0)
            result = rc;
        if (cqe.flags & IORING_CQE_F_NOTIF)
            break;
    }
    pthread_mutex_unlock(&r->lock);
    return result;
}

#else /* no io_uring headers at build time */

EXPORT struct pmca_uring *pmca_uring_open(unsigned entries, unsigned table_size, int *error)
{
    (void)entries;
    (void)table_size;
    *error = ENOSYS;
    return NULL;
}
EXPORT void pmca_uring_close(struct pmca_uring *r) { (void)r; }
EXPORT int pmca_uring_register(struct pmca_uring *r, unsigned i, void *b, size_t l)
{
    (void)r, (void)i, (void)b, (void)l;
    return -ENOSYS;
}
EXPORT int pmca_uring_unregister(struct pmca_uring *r, unsigned i)
{
    (void)r, (void)i;
    return -ENOSYS;
}
EXPORT long pmca_uring_write_fixed(struct pmca_uring *r, int fd, void *a, size_t l, uint64_t o,
                                   unsigned i)
{
    (void)r, (void)fd, (void)a, (void)l, (void)o, (void)i;
    return -ENOSYS;
}
EXPORT long pmca_uring_read_fixed(struct pmca_uring *r, int fd, void *a, size_t l, uint64_t o,
                                  unsigned i)
{
    (void)r, (void)fd, (void)a, (void)l, (void)o, (void)i;
    return -ENOSYS;
}
EXPORT long pmca_uring_send_zc_fixed(struct pmca_uring *r, int fd, void *a, size_t l, unsigned i,
                                     int f)
{
    (void)r, (void)fd, (void)a, (void)l, (void)i, (void)f;
    return -ENOSYS;
}

#endif
