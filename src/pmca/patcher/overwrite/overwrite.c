/*
 * patcher/overwrite bookkeeping: which patches were applied, in which order,
 * by whom, and the exact bytes before and after, so that restore_all() can
 * undo them in reverse order and prove byte-exactness.
 *
 * This library is not a hook and never runs inside one: a mutex is fine.
 * Its state lives and dies with the library (a dso-mode component unloads
 * it at its last close).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

#define MAX_RECORDS 64
#define MAX_PATCH_BYTES 32 /* Open MPI's MCA_BASE_PATCHER_MAX_PATCH */
#define NAME_LENGTH 64     /* including the terminating NUL */

/* Layout shared with Python (ctypes): keep field order and sizes stable. */
struct pmca_patch_record {
    char symbol[NAME_LENGTH];
    char owner[NAME_LENGTH];
    uint64_t address;
    uint32_t length;
    uint32_t reserved;
    uint8_t original[MAX_PATCH_BYTES];
    uint8_t patched[MAX_PATCH_BYTES];
};

/*
 * The part of the module that belongs to a patcher base keeping Open MPI's
 * layout: mca_patcher_base_module_t embeds patch_list and patch_list_mutex,
 * which the base constructs at select and destructs at close. pmca's own
 * patcher base keeps its records in the table below and never touches this.
 * It lives in the library (zero, i.e. unconstructed, at every load) so that
 * a raw pointer to it dies with the library, as Open MPI's opal_patcher did
 * with mca_patcher_overwrite.so.
 */
struct pmca_patcher_list_item {
    struct pmca_patcher_list_item *next;
    struct pmca_patcher_list_item *prev;
};

struct pmca_patcher_base_part {
    struct pmca_patcher_list_item patch_list; /* sentinel */
    uint64_t patch_list_length;
    pthread_mutex_t patch_list_mutex;
};

EXPORT struct pmca_patcher_base_part pmca_patcher_base_part;

EXPORT uint32_t pmca_patcher_base_part_size(void)
{
    return (uint32_t)sizeof(struct pmca_patcher_base_part);
}

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pmca_patch_record table[MAX_RECORDS];
static int table_count;

static int copy_name(char destination[NAME_LENGTH], const char *source)
{
    if (!source)
        return -EINVAL;
    size_t length = strnlen(source, NAME_LENGTH);
    if (length == 0 || length >= NAME_LENGTH)
        return -EINVAL;
    memcpy(destination, source, length + 1);
    return 0;
}

/* Append a record; returns its index, -EINVAL for bad arguments, -ENOSPC
 * when the table is full. */
EXPORT int pmca_patcher_add(const char *symbol, uint64_t address, const uint8_t *original,
                            const uint8_t *patched, uint32_t length, const char *owner)
{
    struct pmca_patch_record record;
    memset(&record, 0, sizeof record);
    if (!original || !patched || length == 0 || length > MAX_PATCH_BYTES || address == 0)
        return -EINVAL;
    if (copy_name(record.symbol, symbol) != 0 || copy_name(record.owner, owner) != 0)
        return -EINVAL;
    record.address = address;
    record.length = length;
    memcpy(record.original, original, length);
    memcpy(record.patched, patched, length);

    pthread_mutex_lock(&table_lock);
    int index = table_count < MAX_RECORDS ? table_count++ : -ENOSPC;
    if (index >= 0)
        table[index] = record;
    pthread_mutex_unlock(&table_lock);
    return index;
}

EXPORT int pmca_patcher_count(void)
{
    pthread_mutex_lock(&table_lock);
    int count = table_count;
    pthread_mutex_unlock(&table_lock);
    return count;
}

/* Copy record `index` (0 = first applied); 0 on success, -ERANGE if absent. */
EXPORT int pmca_patcher_get(int index, struct pmca_patch_record *out)
{
    if (!out)
        return -EINVAL;
    pthread_mutex_lock(&table_lock);
    int status = (index >= 0 && index < table_count) ? 0 : -ERANGE;
    if (status == 0)
        *out = table[index];
    pthread_mutex_unlock(&table_lock);
    return status;
}

/* Remove the most recent record into *out; 1 if one was removed, 0 if the
 * table was empty. */
EXPORT int pmca_patcher_pop(struct pmca_patch_record *out)
{
    if (!out)
        return -EINVAL;
    pthread_mutex_lock(&table_lock);
    int popped = table_count > 0;
    if (popped) {
        *out = table[--table_count];
        memset(&table[table_count], 0, sizeof table[table_count]);
    }
    pthread_mutex_unlock(&table_lock);
    return popped;
}

EXPORT int pmca_patcher_capacity(void) { return MAX_RECORDS; }

EXPORT uint32_t pmca_patcher_record_size(void)
{
    return (uint32_t)sizeof(struct pmca_patch_record);
}
