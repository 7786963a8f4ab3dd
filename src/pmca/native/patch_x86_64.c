/*
 * Live prologue patching of libc on x86_64, atomic against threads that are
 * executing the target ("pad2"):
 *
 *   1. a trampoline `movabs $hook, %r11; jmp *%r11` on a page we map within
 *      rel32 reach of libc and never free;
 *   2. `jmp rel32 -> trampoline` written into linker padding (NOPs/INT3
 *      outside any symbol) within rel8 reach of the entry; those bytes are
 *      never executed, so the write order does not matter;
 *   3. ONE atomic 2-byte store of `jmp rel8 -> padding` at the entry (after
 *      endbr64), inside an instruction of at least two bytes: a thread sees
 *      either the old instruction or our jump, never a torn mix.
 *
 * Restore is the same single 2-byte store of the original bytes, made with
 * compare-and-swap so that it only happens while the bytes are still ours.
 * The padding jump stays: a thread may have taken the short jump just
 * before the restore and not yet executed the padding, and rewriting the
 * padding under it could not be made safe.
 */
#include "hooks.h"

#if defined(__x86_64__) && defined(__GLIBC__)

#include "x86_decode.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define JUMP_SHORT_LENGTH 2
#define JUMP_NEAR_LENGTH 5
#define TRAMPOLINE_STRIDE 16
#define TRAMPOLINE_CODE_LENGTH 13
#define PAGE_GUESS 4096UL
#define REL32_REACH 0x7ff00000L /* keep a margin below 2 GiB */
#define TEXT_NOT_WRITABLE "mprotect(PROT_WRITE|PROT_EXEC) on libc text was denied (W^X policy?)"

struct site {
    int state;
    int padding_written;
    uintptr_t function;
    uintptr_t patch_address;
    uintptr_t padding_address;
    uint8_t original[JUMP_SHORT_LENGTH];
    uint8_t patched[JUMP_SHORT_LENGTH];
    uint8_t padding_original[JUMP_NEAR_LENGTH];
    uint8_t padding_patched[JUMP_NEAR_LENGTH];
};

static struct site sites[PMCA_SYM_COUNT];
static uintptr_t trampoline_page;

/* ------------------------------------------------------------------------ */
/* Cross-modifying code: serialise every core running our threads.          */
/* ------------------------------------------------------------------------ */

enum {
    MEMBARRIER_QUERY = 0,
    MEMBARRIER_PRIVATE_EXPEDITED = 1 << 3,
    MEMBARRIER_REGISTER_PRIVATE_EXPEDITED = 1 << 4,
    MEMBARRIER_PRIVATE_EXPEDITED_SYNC_CORE = 1 << 5,
    MEMBARRIER_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE = 1 << 6,
};

static int barrier_command; /* 0: none available */
static int barrier_register_command;

static long membarrier(int command)
{
    return pmca_raw_syscall6(SYS_membarrier, command, 0, 0, 0, 0, 0);
}

int pmca_patch_membarrier_init(void)
{
    long supported = membarrier(MEMBARRIER_QUERY);
    if (pmca_is_error(supported))
        return 0;
    if ((supported & MEMBARRIER_PRIVATE_EXPEDITED_SYNC_CORE) &&
        !pmca_is_error(membarrier(MEMBARRIER_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE))) {
        barrier_command = MEMBARRIER_PRIVATE_EXPEDITED_SYNC_CORE;
        barrier_register_command = MEMBARRIER_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE;
    } else if ((supported & MEMBARRIER_PRIVATE_EXPEDITED) &&
               !pmca_is_error(membarrier(MEMBARRIER_REGISTER_PRIVATE_EXPEDITED))) {
        barrier_command = MEMBARRIER_PRIVATE_EXPEDITED;
        barrier_register_command = MEMBARRIER_REGISTER_PRIVATE_EXPEDITED;
    }
    return barrier_command;
}

/* x86 keeps instruction fetch coherent with aligned stores in practice;
 * the barrier makes it architectural where the kernel offers it. */
static void serialise_cores(void)
{
    if (!barrier_command)
        return;
    if (membarrier(barrier_command) == -EPERM) { /* e.g. registration lost */
        if (!pmca_is_error(membarrier(barrier_register_command)))
            (void)membarrier(barrier_command);
    }
}

PMCA_EXPORT const char *pmca_hooks_membarrier_mode(void)
{
    switch (barrier_command) {
    case MEMBARRIER_PRIVATE_EXPEDITED_SYNC_CORE: return "private-expedited-sync-core";
    case MEMBARRIER_PRIVATE_EXPEDITED: return "private-expedited";
    default: return "none";
    }
}

/* ------------------------------------------------------------------------ */
/* Writing code                                                             */
/* ------------------------------------------------------------------------ */

static uintptr_t page_size(void)
{
    long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? (uintptr_t)size : PAGE_GUESS;
}

/* libc text is mapped r-x; it is made writable only around each store. */
static int set_code_writable(uintptr_t start, size_t length, int writable)
{
    uintptr_t page = page_size();
    uintptr_t first = start & ~(page - 1);
    uintptr_t last = (start + length + page - 1) & ~(page - 1);
    int protection = PROT_READ | PROT_EXEC | (writable ? PROT_WRITE : 0);
    return mprotect((void *)first, last - first, protection) == 0 ? 0 : errno;
}

static int fail(struct pmca_site_report *report, int status, int sys_errno, const char *reason)
{
    report->status = (uint32_t)status;
    report->sys_errno = sys_errno;
    (void)snprintf(report->reason, sizeof report->reason, "%s", reason);
    return status;
}

/* ------------------------------------------------------------------------ */
/* Trampolines                                                              */
/* ------------------------------------------------------------------------ */

static int within_rel32(uintptr_t from, uintptr_t to)
{
    long distance = (long)(to - from);
    return distance > -REL32_REACH && distance < REL32_REACH;
}

static uintptr_t map_page_near(uintptr_t anchor)
{
    uintptr_t page = page_size();
    for (uintptr_t step = 1; step <= 16384; step++) {
        uintptr_t offset = step * 0x10000UL;
        uintptr_t candidates[2] = {anchor - offset, anchor + (64UL << 20) + offset};
        for (int i = 0; i < 2; i++) {
            uintptr_t hint = candidates[i] & ~(page - 1);
            long mapped = pmca_raw_syscall6(SYS_mmap, (long)hint, (long)page,
                                            PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                                            -1, 0);
            if (pmca_is_error(mapped))
                continue;
            if (within_rel32((uintptr_t)mapped, anchor))
                return (uintptr_t)mapped;
            /* A kernel older than 4.17 treats the flag as a hint only. */
            (void)pmca_raw_syscall6(SYS_munmap, mapped, (long)page, 0, 0, 0, 0);
        }
    }
    return 0;
}

/* One page, one 16-byte slot per hook, written once, never freed: a thread
 * may be inside a trampoline at any time after it was first published. */
static int ensure_trampolines(uintptr_t function, struct pmca_site_report *report)
{
    if (trampoline_page)
        return PMCA_OK;
    uintptr_t page = map_page_near(function);
    if (!page)
        return fail(report, PMCA_NO_TRAMPOLINE, 0,
                    "no free page within 2 GiB of libc for the trampolines");
    for (int symbol = 0; symbol < PMCA_SYM_COUNT; symbol++) {
        uint8_t *slot = (uint8_t *)(page + (uintptr_t)symbol * TRAMPOLINE_STRIDE);
        uint64_t hook = (uint64_t)(uintptr_t)pmca_hook_target(symbol);
        slot[0] = 0x49, slot[1] = 0xbb; /* movabs $hook, %r11 */
        memcpy(slot + 2, &hook, sizeof hook);
        slot[10] = 0x41, slot[11] = 0xff, slot[12] = 0xe3; /* jmp *%r11 */
        memset(slot + TRAMPOLINE_CODE_LENGTH, 0xcc, TRAMPOLINE_STRIDE - TRAMPOLINE_CODE_LENGTH);
    }
    if (mprotect((void *)page, page_size(), PROT_READ | PROT_EXEC) != 0)
        return fail(report, PMCA_NO_TRAMPOLINE, errno,
                    "cannot make the trampoline page executable");
    trampoline_page = page;
    return PMCA_OK;
}

static uintptr_t trampoline_of(int symbol)
{
    return trampoline_page ? trampoline_page + (uintptr_t)symbol * TRAMPOLINE_STRIDE : 0;
}

static int trampoline_intact(int symbol)
{
    const uint8_t *slot = (const uint8_t *)trampoline_of(symbol);
    uint64_t hook = (uint64_t)(uintptr_t)pmca_hook_target(symbol);
    return slot && slot[0] == 0x49 && slot[1] == 0xbb && memcmp(slot + 2, &hook, 8) == 0 &&
           slot[10] == 0x41 && slot[11] == 0xff && slot[12] == 0xe3;
}

/* ------------------------------------------------------------------------ */
/* Padding                                                                   */
/* ------------------------------------------------------------------------ */

/* 1 if no dynamic symbol covers `address` (glibc's dladdr1 only reports a
 * symbol whose [value, value + size) contains the address; the size check
 * keeps this right for resolvers that report the nearest one below). */
static int outside_symbols(uintptr_t address)
{
    Dl_info info;
    const ElfW(Sym) *symbol = NULL;
    if (!dladdr1((void *)address, &info, (void **)&symbol, RTLD_DL_SYMENT) || !symbol ||
        !info.dli_saddr)
        return 1;
    uintptr_t start = (uintptr_t)info.dli_saddr;
    return address < start || address >= start + symbol->st_size;
}

static int symbol_extent(uintptr_t address, uintptr_t *start, uintptr_t *end)
{
    Dl_info info;
    const ElfW(Sym) *symbol = NULL;
    if (!dladdr1((void *)address, &info, (void **)&symbol, RTLD_DL_SYMENT) || !symbol ||
        !info.dli_saddr || symbol->st_size == 0)
        return 0;
    *start = (uintptr_t)info.dli_saddr;
    *end = *start + symbol->st_size;
    return 1;
}

static int overlaps_other_site(int symbol, uintptr_t start, size_t length)
{
    for (int other = 0; other < PMCA_SYM_COUNT; other++) {
        const struct site *s = &sites[other];
        if (other == symbol || !s->padding_written)
            continue;
        if (start < s->padding_address + JUMP_NEAR_LENGTH && s->padding_address < start + length)
            return 1;
    }
    return 0;
}

static int usable_padding(int symbol, uintptr_t start, uintptr_t end)
{
    if (end <= start || end - start < JUMP_NEAR_LENGTH || end - start > 64)
        return 0;
    if (!pmca_x86_is_padding((const uint8_t *)start, end - start))
        return 0;
    for (uintptr_t at = start; at < end; at++)
        if (!outside_symbols(at))
            return 0;
    return !overlaps_other_site(symbol, start, end - start);
}

static int short_reach(uintptr_t patch_address, uintptr_t target)
{
    long displacement = (long)(target - (patch_address + JUMP_SHORT_LENGTH));
    return displacement >= -128 && displacement <= 127;
}

/* Padding after the function (up to the next 16-byte boundary), else the
 * padding the previous function left before this one. */
static uintptr_t find_padding(int symbol, uintptr_t function, uintptr_t patch_address)
{
    uintptr_t start, end;
    if (symbol_extent(function, &start, &end) && start == function) {
        uintptr_t boundary = (end + 15) & ~(uintptr_t)15;
        if (usable_padding(symbol, end, boundary) && short_reach(patch_address, end))
            return end;
    }
    /* dladdr only names a symbol for addresses inside it: walk back over
     * uncovered bytes to where the previous function ends. */
    uintptr_t gap_start = function;
    while (function - gap_start < 16 && outside_symbols(gap_start - 1))
        gap_start--;
    if (gap_start < function && function - gap_start < 16 &&
        symbol_extent(gap_start - 1, &start, &end) && end == gap_start) {
        uintptr_t slot = function - JUMP_NEAR_LENGTH;
        if (usable_padding(symbol, gap_start, function) && short_reach(patch_address, slot))
            return slot;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Install, restore, inspect                                                 */
/* ------------------------------------------------------------------------ */

void pmca_patch_describe(int symbol, struct pmca_site_report *report)
{
    const struct site *s = &sites[symbol];
    uintptr_t function = (uintptr_t)pmca_hooks_symbol_address(symbol);
    report->function = function;
    report->patch_address = s->patch_address;
    report->padding_address = s->padding_written ? s->padding_address : 0;
    report->trampoline = trampoline_of(symbol);
    report->hook = (uint64_t)(uintptr_t)pmca_hook_target(symbol);
    report->state = (uint32_t)s->state;
    report->replaced_length = s->patch_address ? JUMP_SHORT_LENGTH : 0;
    report->padding_length = s->padding_written ? JUMP_NEAR_LENGTH : 0;
    memcpy(report->original, s->original, JUMP_SHORT_LENGTH);
    memcpy(report->patched, s->patched, JUMP_SHORT_LENGTH);
    memcpy(report->padding_original, s->padding_original, JUMP_NEAR_LENGTH);
    memcpy(report->padding_patched, s->padding_patched, JUMP_NEAR_LENGTH);
    if (function)
        memcpy(report->found, (const void *)function, sizeof report->found);
}

int pmca_patch_verify(int symbol)
{
    const struct site *s = &sites[symbol];
    return s->state == PMCA_STATE_INSTALLED &&
           memcmp((const void *)s->patch_address, s->patched, JUMP_SHORT_LENGTH) == 0 &&
           memcmp((const void *)s->padding_address, s->padding_patched, JUMP_NEAR_LENGTH) == 0 &&
           trampoline_intact(symbol);
}

int pmca_patch_orphan_if_overwritten(int symbol)
{
    struct site *s = &sites[symbol];
    if (s->state != PMCA_STATE_INSTALLED || pmca_patch_verify(symbol))
        return 0;
    /* Someone wrote over our jump: our hook is unreachable, so stop
     * trusting it; restore will now leave those bytes alone. */
    s->state = PMCA_STATE_ORPHANED;
    __atomic_store_n(&pmca_symbol_active[symbol], 0, __ATOMIC_SEQ_CST);
    return 1;
}

static int write_padding_jump(int symbol, struct site *s, uintptr_t padding,
                              struct pmca_site_report *report)
{
    uintptr_t trampoline = trampoline_of(symbol);
    if (!within_rel32(padding + JUMP_NEAR_LENGTH, trampoline))
        return fail(report, PMCA_NO_TRAMPOLINE, 0,
                    "the trampoline is out of rel32 reach of the padding");
    int32_t displacement = (int32_t)((long)trampoline - (long)(padding + JUMP_NEAR_LENGTH));
    uint8_t jump[JUMP_NEAR_LENGTH] = {0xe9};
    memcpy(jump + 1, &displacement, sizeof displacement);

    int error = set_code_writable(padding, JUMP_NEAR_LENGTH, 1);
    if (error)
        return fail(report, PMCA_PROTECT_FAILED, error,
                    TEXT_NOT_WRITABLE);
    memcpy(s->padding_original, (const void *)padding, JUMP_NEAR_LENGTH);
    memcpy((void *)padding, jump, JUMP_NEAR_LENGTH);
    (void)set_code_writable(padding, JUMP_NEAR_LENGTH, 0);
    serialise_cores();
    memcpy(s->padding_patched, jump, JUMP_NEAR_LENGTH);
    s->padding_address = padding;
    s->padding_written = 1;
    return PMCA_OK;
}

static int prepare_padding(int symbol, struct site *s, uintptr_t function,
                           uintptr_t patch_address, struct pmca_site_report *report)
{
    /* Our earlier padding jump is still there: reuse it as is. */
    if (s->padding_written &&
        memcmp((const void *)s->padding_address, s->padding_patched, JUMP_NEAR_LENGTH) == 0 &&
        short_reach(patch_address, s->padding_address))
        return PMCA_OK;
    uintptr_t padding = find_padding(symbol, function, patch_address);
    if (!padding)
        return fail(report, PMCA_NO_PADDING, 0,
                    "no NOP/INT3 padding outside any symbol within jmp rel8 reach of "
                    "the entry");
    return write_padding_jump(symbol, s, padding, report);
}

static int check_prologue(const uint8_t *code, uintptr_t patch_address,
                          struct pmca_site_report *report)
{
    const char *foreign = pmca_x86_foreign_patch(code);
    if (foreign) {
        char reason[PMCA_REASON_LEN];
        (void)snprintf(reason, sizeof reason,
                       "the entry already holds %s; refusing to stack on it", foreign);
        return fail(report, PMCA_REFUSED_FOREIGN, 0, reason);
    }
    int length = pmca_x86_whitelisted_length(code);
    if (length == 0)
        return fail(report, PMCA_REFUSED_PROLOGUE, 0,
                    "the first instruction is not on the known-prologue whitelist");
    if (length < JUMP_SHORT_LENGTH)
        return fail(report, PMCA_REFUSED_PROLOGUE, 0,
                    "the first instruction is shorter than the 2-byte jump");
    if ((patch_address & 63) > 62)
        return fail(report, PMCA_REFUSED_PROLOGUE, 0,
                    "the entry straddles a cache line: no atomic 2-byte store");
    return PMCA_OK;
}

int pmca_patch_install(int symbol, uintptr_t function, struct pmca_site_report *report)
{
    struct site *s = &sites[symbol];
    uintptr_t patch_address = function + (pmca_x86_is_endbr64((const uint8_t *)function) ? 4 : 0);
    const uint8_t *code = (const uint8_t *)patch_address;

    if (s->state == PMCA_STATE_INSTALLED) {
        if (pmca_patch_verify(symbol)) {
            pmca_patch_describe(symbol, report);
            report->status = PMCA_ALREADY_INSTALLED;
            return PMCA_ALREADY_INSTALLED;
        }
        s->state = PMCA_STATE_ORPHANED; /* overwritten behind our back */
        __atomic_store_n(&pmca_symbol_active[symbol], 0, __ATOMIC_SEQ_CST);
    }
    s->function = function;

    /* Our own jump is back (another patcher restored the bytes it found,
     * which were ours): adopt it rather than refuse it as foreign. */
    if (s->state == PMCA_STATE_ORPHANED && s->patch_address == patch_address &&
        memcmp(code, s->patched, JUMP_SHORT_LENGTH) == 0 &&
        memcmp((const void *)s->padding_address, s->padding_patched, JUMP_NEAR_LENGTH) == 0 &&
        trampoline_intact(symbol)) {
        __atomic_store_n(&pmca_symbol_active[symbol], 1, __ATOMIC_SEQ_CST);
        s->state = PMCA_STATE_INSTALLED;
        pmca_patch_describe(symbol, report);
        report->status = PMCA_OK;
        return PMCA_OK;
    }

    pmca_patch_describe(symbol, report);
    int status = check_prologue(code, patch_address, report);
    if (status == PMCA_OK)
        status = ensure_trampolines(function, report);
    if (status == PMCA_OK)
        status = prepare_padding(symbol, s, function, patch_address, report);
    if (status != PMCA_OK)
        return status;

    long displacement = (long)(s->padding_address - (patch_address + JUMP_SHORT_LENGTH));
    uint8_t jump[JUMP_SHORT_LENGTH] = {0xeb, (uint8_t)(int8_t)displacement};
    uint16_t jump_word, original_word;
    memcpy(&jump_word, jump, sizeof jump_word);
    memcpy(&original_word, code, sizeof original_word);

    int error = set_code_writable(patch_address, JUMP_SHORT_LENGTH, 1);
    if (error)
        return fail(report, PMCA_PROTECT_FAILED, error,
                    TEXT_NOT_WRITABLE);
    memcpy(s->original, &original_word, sizeof original_word);
    memcpy(s->patched, jump, sizeof jump);
    s->patch_address = patch_address;
    /* Record from the first call that reaches the hook. */
    __atomic_store_n(&pmca_symbol_active[symbol], 1, __ATOMIC_SEQ_CST);
    uint16_t expected = original_word;
    int swapped = __atomic_compare_exchange_n((uint16_t *)patch_address, &expected, jump_word,
                                              0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    (void)set_code_writable(patch_address, JUMP_SHORT_LENGTH, 0);
    serialise_cores();
    if (!swapped) { /* another patcher wrote between our check and our store */
        __atomic_store_n(&pmca_symbol_active[symbol], 0, __ATOMIC_SEQ_CST);
        pmca_patch_describe(symbol, report);
        return fail(report, PMCA_REFUSED_FOREIGN, 0,
                    "the entry changed while patching: another patcher is active");
    }
    s->state = PMCA_STATE_INSTALLED;
    pmca_patch_describe(symbol, report);
    report->status = PMCA_OK;
    return PMCA_OK;
}

int pmca_patch_restore(int symbol, struct pmca_site_report *report)
{
    struct site *s = &sites[symbol];
    pmca_patch_describe(symbol, report);
    if (s->state == PMCA_STATE_ORPHANED)
        return fail(report, PMCA_NOT_OURS, 0,
                    "our jump was already overwritten by someone else; the hook stays "
                    "in place as pass-through");
    if (s->state != PMCA_STATE_INSTALLED)
        return fail(report, PMCA_NOT_INSTALLED, 0, "not installed");

    uint16_t ours, original;
    memcpy(&ours, s->patched, sizeof ours);
    memcpy(&original, s->original, sizeof original);
    int swapped = 0;
    if (memcmp((const void *)s->patch_address, s->patched, JUMP_SHORT_LENGTH) == 0) {
        int error = set_code_writable(s->patch_address, JUMP_SHORT_LENGTH, 1);
        if (error)
            return fail(report, PMCA_PROTECT_FAILED, error, TEXT_NOT_WRITABLE);
        uint16_t expected = ours;
        swapped = __atomic_compare_exchange_n((uint16_t *)s->patch_address, &expected,
                                              original, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        (void)set_code_writable(s->patch_address, JUMP_SHORT_LENGTH, 0);
        serialise_cores();
    }
    __atomic_store_n(&pmca_symbol_active[symbol], 0, __ATOMIC_SEQ_CST);
    if (!swapped) {
        s->state = PMCA_STATE_ORPHANED;
        pmca_patch_describe(symbol, report);
        return fail(report, PMCA_NOT_OURS, 0,
                    "the entry no longer holds our jump; left in place, hook pass-through");
    }
    s->state = PMCA_STATE_IDLE;
    pmca_patch_describe(symbol, report);
    report->status = PMCA_OK;
    return PMCA_OK;
}

#else /* not x86_64 glibc */

/* Elsewhere (aarch64, musl...): live patching is not implemented; every
 * install is refused with a reason.  Only x86_64 glibc is built and tested. */
#include <stdio.h>
#include <string.h>

int pmca_patch_membarrier_init(void) { return 0; }

PMCA_EXPORT const char *pmca_hooks_membarrier_mode(void) { return "none"; }

void pmca_patch_describe(int symbol, struct pmca_site_report *report)
{
    report->function = pmca_hooks_symbol_address(symbol);
    report->hook = (uint64_t)(uintptr_t)pmca_hook_target(symbol);
}

int pmca_patch_verify(int symbol)
{
    (void)symbol;
    return 0;
}

int pmca_patch_orphan_if_overwritten(int symbol)
{
    (void)symbol;
    return 0;
}

int pmca_patch_install(int symbol, uintptr_t function, struct pmca_site_report *report)
{
    (void)function;
    pmca_patch_describe(symbol, report);
    report->status = PMCA_UNSUPPORTED;
    (void)snprintf(report->reason, sizeof report->reason,
                   "live prologue patching is implemented for x86_64 glibc only");
    return PMCA_UNSUPPORTED;
}

int pmca_patch_restore(int symbol, struct pmca_site_report *report)
{
    pmca_patch_describe(symbol, report);
    report->status = PMCA_NOT_INSTALLED;
    (void)snprintf(report->reason, sizeof report->reason, "not installed");
    return PMCA_NOT_INSTALLED;
}

#endif
