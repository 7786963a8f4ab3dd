/*
 * Open MPI 5 + libfabric 2.5.1's synchronous design, reduced to what the
 * madvise self-deadlock (open-mpi/ompi#13149, ofiwg/libfabric#10879) needs.
 * A reproduction: do not use it for anything else.
 *
 * - Open MPI's memory/patcher: libc's madvise and munmap prologues are
 *   overwritten with a 13-byte `movabs r11, hook; jmp r11` (patcher/overwrite
 *   on x86_64).  The hook calls the release callbacks right there, on the
 *   calling thread, before the system call (opal_mem_hooks_release_hook).
 * - Open MPI exports those hooks to libfabric as its import monitor: the
 *   callback is ofi_import_monitor_notify, which takes mm_list_rwlock (read)
 *   and mm_lock, then invalidates overlapping entries of every MR cache.
 * - libfabric 2.5.1's util_mr_cache_create: the entry is allocated and
 *   registered outside the lock, then mm_lock is taken and the entry inserted
 *   into the cache's red-black map.  ofi_rbnode_alloc takes a node from the
 *   map's free list or, when it is empty, calls malloc() -- with mm_lock held.
 *   A node freed by a delete goes back to the free list, never to malloc;
 *   closing the cache (domain) frees them.
 *
 * Under an allocator that returns memory with madvise() from inside malloc()
 * (mimalloc with eager purging), that malloc() enters the hook, the callback
 * waits for mm_lock, and the thread that holds mm_lock is itself: a
 * non-recursive mutex, locked twice by one thread, forever.  libfabric's fix
 * (d27cfffdc, in 2.6.0) allocates the node before taking the lock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define PATCH_BYTES 13

/* ---- opal/memoryhooks: native release callbacks, called synchronously ---- */

typedef void (*release_cb_t)(void *addr, size_t len, int from_alloc, void *ctx);

#define MAX_CALLBACKS 8
static struct {
    release_cb_t cb;
    void *ctx;
} callbacks[MAX_CALLBACKS];
static volatile int ncallbacks;

static long hook_calls;

EXPORT long repro_hook_calls(void)
{
    return __atomic_load_n(&hook_calls, __ATOMIC_RELAXED);
}

static void opal_mem_hooks_release_hook(void *addr, size_t len, int from_alloc)
{
    __atomic_add_fetch(&hook_calls, 1, __ATOMIC_RELAXED);
    /* Open MPI drops its list lock around each callback; there is no other guard. */
    for (int i = 0; i < ncallbacks; i++)
        callbacks[i].cb(addr, len, from_alloc, callbacks[i].ctx);
}

/* ---- opal/mca/memory/patcher: hooks that call the callbacks in place ---- */

static int releasing_advice(int advice)
{
    return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE ||
           advice == POSIX_MADV_DONTNEED;
}

static int intercept_madvise(void *addr, size_t len, int advice)
{
    if (releasing_advice(advice))
        opal_mem_hooks_release_hook(addr, len, 1);
    long rc = syscall(SYS_madvise, addr, len, advice);
    return (int)rc;
}

static int intercept_munmap(void *addr, size_t len)
{
    opal_mem_hooks_release_hook(addr, len, 1);
    return (int)syscall(SYS_munmap, addr, len);
}

struct patch {
    const char *symbol;
    void *hook;
    unsigned char *target;
    unsigned char saved[PATCH_BYTES];
};

static struct patch patches[] = {
    {"madvise", (void *)intercept_madvise, NULL, {0}},
    {"munmap", (void *)intercept_munmap, NULL, {0}},
};
#define NPATCHES (sizeof(patches) / sizeof(patches[0]))

static int write_text(unsigned char *target, const unsigned char *bytes, size_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)target & ~(uintptr_t)(page - 1);
    size_t span = ((uintptr_t)target + n - start + (size_t)page - 1) & ~(size_t)(page - 1);
    if (mprotect((void *)start, span, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
        return -errno;
    memcpy(target, bytes, n);
    __builtin___clear_cache((char *)target, (char *)target + n);
    if (mprotect((void *)start, span, PROT_READ | PROT_EXEC) != 0)
        return -errno;
    return 0;
}

/* Patch libc's madvise and munmap: 0, -ENOTSUP off x86_64, -EBUSY if already patched. */
EXPORT int repro_install_hooks(void)
{
#if defined(__x86_64__)
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc == NULL)
        return -ENOENT;
    for (size_t i = 0; i < NPATCHES; i++) {
        unsigned char *target = dlsym(libc, patches[i].symbol);
        if (target == NULL)
            return -ENOENT;
        /* mca_patcher_is_function_patched: someone's jump is already there */
        if (target[0] == 0xe9 || target[0] == 0xeb || (target[0] == 0x49 && target[1] == 0xbb))
            return -EBUSY;
    }
    for (size_t i = 0; i < NPATCHES; i++) {
        unsigned char code[PATCH_BYTES] = {0x49, 0xbb};
        uint64_t hook = (uint64_t)(uintptr_t)patches[i].hook;
        unsigned char *target = dlsym(libc, patches[i].symbol);
        memcpy(code + 2, &hook, 8);
        code[10] = 0x41, code[11] = 0xff, code[12] = 0xe3; /* jmp r11 */
        memcpy(patches[i].saved, target, PATCH_BYTES);
        int rc = write_text(target, code, PATCH_BYTES);
        if (rc != 0)
            return rc;
        patches[i].target = target;
    }
    return 0;
#else
    return -ENOTSUP;
#endif
}

EXPORT void repro_remove_hooks(void)
{
    for (size_t i = 0; i < NPATCHES; i++)
        if (patches[i].target != NULL) {
            write_text(patches[i].target, patches[i].saved, PATCH_BYTES);
            patches[i].target = NULL;
        }
}

/* ---- libfabric 2.5.1: MR caches under the global mm_lock ---- */

static pthread_mutex_t mm_lock = PTHREAD_MUTEX_INITIALIZER; /* non-recursive */
static pthread_rwlock_t mm_list_rwlock = PTHREAD_RWLOCK_INITIALIZER;

struct entry {
    uintptr_t base, end;
    int use_cnt, cached;
    struct rbnode *node;
    struct entry *flush_next;
};

struct rbnode { /* ofi_rbnode's size; an unbalanced tree is enough to show the locking */
    struct rbnode *parent, *left, *right;
    int color;
    struct entry *entry;
    void *key;
};

struct cache {
    struct rbnode *root, *free_list;
    struct entry *flush_list; /* uncached, unused: freed outside the lock */
    struct cache *next;
    size_t cached_cnt, notified;
};

static struct cache *caches; /* the monitor's list, under mm_list_rwlock */

static struct rbnode *rbnode_alloc(struct cache *c)
{
    struct rbnode *node = c->free_list;
    if (node == NULL)
        return malloc(sizeof(*node)); /* with mm_lock held: the bug */
    c->free_list = node->right;
    return node;
}

static void rbnode_free(struct cache *c, struct rbnode *node)
{
    node->right = c->free_list;
    c->free_list = node;
}

static struct rbnode **slot_for(struct cache *c, uintptr_t base)
{
    struct rbnode **link = &c->root;
    while (*link != NULL)
        link = base < (*link)->entry->base ? &(*link)->left : &(*link)->right;
    return link;
}

/* ofi_mr_rbt_find: one path down, overlapping counts as "equal" */
static struct rbnode **find_overlapping(struct cache *c, uintptr_t lo, uintptr_t hi)
{
    struct rbnode **link = &c->root;
    while (*link != NULL) {
        struct entry *e = (*link)->entry;
        if (hi <= e->base)
            link = &(*link)->left;
        else if (lo >= e->end)
            link = &(*link)->right;
        else
            return link;
    }
    return NULL;
}

static void remove_node(struct cache *c, struct rbnode **link)
{
    struct rbnode *node = *link;
    if (node->left == NULL)
        *link = node->right;
    else if (node->right == NULL)
        *link = node->left;
    else {
        struct rbnode **succ = &node->right;
        while ((*succ)->left != NULL)
            succ = &(*succ)->left;
        struct rbnode *s = *succ;
        *succ = s->right;
        s->left = node->left;
        s->right = node->right;
        *link = s;
    }
    node->entry->node = NULL;
    node->entry->cached = 0;
    if (node->entry->use_cnt == 0) {
        node->entry->flush_next = c->flush_list;
        c->flush_list = node->entry;
    }
    c->cached_cnt--;
    rbnode_free(c, node);
}

static void uncache_overlapping(struct cache *c, uintptr_t lo, uintptr_t hi)
{
    struct rbnode **link;
    while ((link = find_overlapping(c, lo, hi)) != NULL)
        remove_node(c, link);
}

/* ofi_import_monitor_notify -> ofi_monitor_notify -> ofi_mr_cache_notify */
static void import_monitor_notify(void *addr, size_t len, int from_alloc, void *ctx)
{
    (void)from_alloc;
    (void)ctx;
    pthread_rwlock_rdlock(&mm_list_rwlock);
    pthread_mutex_lock(&mm_lock);
    for (struct cache *c = caches; c != NULL; c = c->next) {
        c->notified++;
        uncache_overlapping(c, (uintptr_t)addr, (uintptr_t)addr + len);
    }
    pthread_mutex_unlock(&mm_lock);
    pthread_rwlock_unlock(&mm_list_rwlock);
}

/* The import monitor's notify for a monitor other than Open MPI's hooks
 * (pmca_monitor.c): the same locks, the same uncaching. */
void repro_monitor_notify(void *addr, size_t len)
{
    import_monitor_notify(addr, len, 1, NULL);
}

/* opal_common_ofi: export the patcher hooks as libfabric's memory monitor. */
EXPORT void repro_import_monitor(void)
{
    if (ncallbacks == 0) {
        callbacks[0].cb = import_monitor_notify;
        callbacks[0].ctx = NULL;
        ncallbacks = 1;
    }
}

EXPORT struct cache *repro_cache_open(void)
{
    struct cache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    pthread_rwlock_wrlock(&mm_list_rwlock);
    c->next = caches;
    caches = c;
    pthread_rwlock_unlock(&mm_list_rwlock);
    return c;
}

static void free_tree(struct rbnode *n)
{
    while (n != NULL) {
        struct rbnode *right = n->right;
        free_tree(n->left);
        free(n->entry);
        free(n);
        n = right;
    }
}

/* ofi_mr_cache_cleanup: the map and its free list go back to malloc. */
EXPORT void repro_cache_close(struct cache *c)
{
    pthread_rwlock_wrlock(&mm_list_rwlock);
    for (struct cache **link = &caches; *link != NULL; link = &(*link)->next)
        if (*link == c) {
            *link = c->next;
            break;
        }
    pthread_rwlock_unlock(&mm_list_rwlock);
    free_tree(c->root);
    while (c->flush_list != NULL) {
        struct entry *next = c->flush_list->flush_next;
        free(c->flush_list);
        c->flush_list = next;
    }
    while (c->free_list != NULL) {
        struct rbnode *next = c->free_list->right;
        free(c->free_list);
        c->free_list = next;
    }
    free(c);
}

/* ofi_mr_cache_search + util_mr_cache_create (2.5.1). */
EXPORT struct entry *repro_register(struct cache *c, void *addr, size_t len)
{
    uintptr_t base = (uintptr_t)addr, end = base + len;
    pthread_mutex_lock(&mm_lock);
    struct rbnode **found = find_overlapping(c, base, end);
    struct entry *hit = NULL;
    if (found != NULL && (*found)->entry->base <= base && end <= (*found)->entry->end) {
        hit = (*found)->entry;
        hit->use_cnt++;
    } else if (found != NULL) {
        uncache_overlapping(c, base, end); /* ofi_mr_cache_find: stale overlap goes */
    }
    struct entry *flush = c->flush_list;
    c->flush_list = NULL;
    pthread_mutex_unlock(&mm_lock);
    while (flush != NULL) { /* ofi_mr_cache_flush: outside the lock */
        struct entry *next = flush->flush_next;
        free(flush);
        flush = next;
    }
    if (hit != NULL)
        return hit;

    struct entry *e = calloc(1, sizeof(*e)); /* util_mr_entry_alloc, outside the lock */
    if (e == NULL)
        return NULL;
    e->base = base;
    e->end = end;
    e->use_cnt = 1;
    /* add_region: the provider registers (pins) the range here, outside the lock */

    pthread_mutex_lock(&mm_lock);
    struct rbnode *node = rbnode_alloc(c); /* ofi_rbmap_insert */
    if (node != NULL) {
        node->left = node->right = NULL;
        node->entry = e;
        *slot_for(c, base) = node;
        e->node = node;
        e->cached = 1;
        c->cached_cnt++;
    }
    pthread_mutex_unlock(&mm_lock);
    return e;
}

/* ofi_mr_cache_delete: an entry the monitor uncached is freed at its last use. */
EXPORT void repro_deregister(struct cache *c, struct entry *e)
{
    (void)c;
    pthread_mutex_lock(&mm_lock);
    int dead = --e->use_cnt == 0 && !e->cached; /* uncached while in use */
    pthread_mutex_unlock(&mm_lock);
    if (dead)
        free(e);
}

/* Where the watchdog finds the lock (its futex word, its owner's thread id). */
EXPORT void *repro_mm_lock_address(void)
{
    return &mm_lock;
}

EXPORT size_t repro_cache_notified(struct cache *c)
{
    return c->notified;
}
