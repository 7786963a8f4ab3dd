/*
 * The workload both designs run, in native threads (an MPI application's
 * own threads).  Each worker opens a registration cache per phase (an MPI
 * session, a new domain), so its tree grows from empty and inserts allocate
 * nodes; it registers freshly allocated buffers, allocates small request
 * objects the size of a tree node, and hands requests, released buffers and
 * finished caches to a progress thread that frees and closes them: memory
 * allocated on one thread and freed on another, which mimalloc returns to
 * its arenas and purges (madvise) when the allocating thread next looks for
 * a page -- inside malloc.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

struct design { /* a cache: the 2.5.1 one in ompi_ofi.c, or pmca's through Python */
    void *(*open)(void);
    void *(*reg)(void *cache, void *address, size_t length);
    void (*dereg)(void *cache, void *registration);
    void (*close)(void *cache);
};

enum { PHASE_REGISTRATIONS = 128, LIVE = 16, REQUEST_SIZE = 48, BACKLOG = 65536 };
/*
 * Few requests per registration keep the tree node a visible share of its
 * size class, so that the node's malloc is often the one whose page runs out
 * and searches (and purges); buffers up to 64 KiB (eager and rendezvous
 * sizes) keep large-page allocations from taking most of the due purges.
 */
static int REQUESTS = 16;
static const size_t sizes[] = {4096, 16384, 65536};

struct item {
    struct item *next;
    void *pointer;
    int is_cache;
};

struct shared {
    const struct design *design;
    pthread_mutex_t lock;
    pthread_cond_t ready, drained;
    struct item *head, *tail;
    long queued;
    double deadline;
    int stopping;
    long phases;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void hand_over(struct shared *s, void *pointer, int is_cache)
{
    struct item *item = malloc(sizeof(*item));
    item->pointer = pointer;
    item->is_cache = is_cache;
    item->next = NULL;
    pthread_mutex_lock(&s->lock);
    while (s->queued >= BACKLOG) /* the progress thread keeps up, or the worker waits */
        pthread_cond_wait(&s->drained, &s->lock);
    s->queued++;
    if (s->tail) {
        s->tail->next = item;
    } else {
        s->head = item;
        pthread_cond_signal(&s->ready);
    }
    s->tail = item;
    pthread_mutex_unlock(&s->lock);
}

static void *progress(void *arg)
{
    struct shared *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (s->head == NULL && !s->stopping)
            pthread_cond_wait(&s->ready, &s->lock);
        struct item *batch = s->head;
        s->head = s->tail = NULL;
        s->queued = 0;
        pthread_cond_broadcast(&s->drained);
        int stop = s->stopping && batch == NULL;
        pthread_mutex_unlock(&s->lock);
        if (stop)
            return NULL;
        while (batch != NULL) {
            struct item *next = batch->next;
            if (batch->is_cache)
                s->design->close(batch->pointer);
            else
                free(batch->pointer);
            free(batch);
            batch = next;
        }
    }
}

static void *worker(void *arg)
{
    struct shared *s = ((void **)arg)[0];
    unsigned seed = (unsigned)(uintptr_t)((void **)arg)[1];
    const struct design *d = s->design;
    while (now() < s->deadline) {
        void *cache = d->open();
        void *buffers[LIVE + 1], *regs[LIVE + 1];
        int live = 0;
        for (int i = 0; i < PHASE_REGISTRATIONS; i++) {
            size_t size = sizes[rand_r(&seed) % (sizeof(sizes) / sizeof(sizes[0]))];
            void *buffer = malloc(size);
            memset(buffer, 1, 64); /* the application writes its header */
            buffers[live] = buffer;
            regs[live++] = d->reg(cache, buffer, size);
            for (int k = 0; k < REQUESTS; k++)
                hand_over(s, malloc(REQUEST_SIZE), 0);
            if (live > LIVE) {
                int victim = (int)(rand_r(&seed) % (unsigned)live);
                d->dereg(cache, regs[victim]);
                hand_over(s, buffers[victim], 0);
                buffers[victim] = buffers[live - 1];
                regs[victim] = regs[--live];
            }
        }
        while (live > 0) {
            live--;
            d->dereg(cache, regs[live]);
            hand_over(s, buffers[live], 0);
        }
        hand_over(s, cache, 1);
        __atomic_add_fetch(&s->phases, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Run `threads` workers for `seconds`; returns the phases completed. */
EXPORT long repro_workload(const struct design *design, int threads, double seconds)
{
    struct shared s;
    memset(&s, 0, sizeof(s));
    if (getenv("PMCA_REPRO_REQUESTS") != NULL)
        REQUESTS = atoi(getenv("PMCA_REPRO_REQUESTS"));
    s.design = design;
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.ready, NULL);
    pthread_cond_init(&s.drained, NULL);
    s.deadline = now() + seconds;
    pthread_t freer, workers[64];
    void *args[64][2];
    if (threads > 64)
        threads = 64;
    pthread_create(&freer, NULL, progress, &s);
    for (int i = 0; i < threads; i++) {
        args[i][0] = &s;
        args[i][1] = (void *)(uintptr_t)(i + 1);
        pthread_create(&workers[i], NULL, worker, args[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(workers[i], NULL);
    pthread_mutex_lock(&s.lock);
    s.stopping = 1;
    pthread_cond_signal(&s.ready);
    pthread_mutex_unlock(&s.lock);
    pthread_join(freer, NULL);
    return s.phases;
}
