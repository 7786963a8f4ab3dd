/*
 * Just enough x86_64 decoding to patch safely: recognise the first
 * instruction of the libc functions we hook (a whitelist, not a
 * disassembler), other patchers' jumps, and the NOP/INT3 padding the
 * linker leaves between functions.
 */
#include "x86_decode.h"

#include <string.h>

int pmca_x86_is_endbr64(const uint8_t *code)
{
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    return memcmp(code, endbr64, sizeof endbr64) == 0;
}

static int is_register_direct(uint8_t modrm) { return (modrm & 0xc0) == 0xc0; }

static int is_rip_relative(uint8_t modrm) { return (modrm & 0xc7) == 0x05; }

/*
 * First instructions glibc's syscall wrappers and small C functions start
 * with.  Anything else is refused rather than guessed at: the jump we write
 * must replace (part of) exactly one instruction.
 */
int pmca_x86_whitelisted_length(const uint8_t *code)
{
    uint8_t op = code[0];
    if (op >= 0xb8 && op <= 0xbf) /* mov r32, imm32 (syscall number) */
        return 5;
    if ((op == 0x31 || op == 0x85 || op == 0x89) && is_register_direct(code[1]))
        return 2; /* xor/test/mov r32, r32 */
    if (op == 0x80 && code[1] == 0x3d) /* cmpb $imm8, rel32(%rip) */
        return 7;
    if (op >= 0x40 && op <= 0x4f) { /* REX prefix */
        uint8_t op2 = code[1];
        if (op == 0x41 && op2 >= 0x54 && op2 <= 0x57) /* push r12..r15 */
            return 2;
        if ((op2 == 0x31 || op2 == 0x85 || op2 == 0x89 || op2 == 0x8b) &&
            is_register_direct(code[2]))
            return 3; /* xor/test/mov r, r (e.g. mov %ecx,%r10d) */
        if ((op2 == 0x8b || op2 == 0x8d) && is_rip_relative(code[2]))
            return 7; /* mov/lea r64, rel32(%rip) */
        if (op == 0x48 && op2 == 0x83 && code[2] == 0xec) /* sub $imm8, %rsp */
            return 4;
        if (op == 0x48 && op2 == 0x81 && code[2] == 0xec) /* sub $imm32, %rsp */
            return 7;
    }
    if (op == 0x64 && code[1] == 0x48 && code[2] == 0x8b && code[3] == 0x04 &&
        code[4] == 0x25) /* mov %fs:imm32, r64 */
        return 9;
    return 0;
}

const char *pmca_x86_foreign_patch(const uint8_t *code)
{
    switch (code[0]) {
    case 0xe9: return "a jmp rel32: another patcher's jump";
    case 0xeb: return "a jmp rel8: another patcher's short jump";
    case 0xe8: return "a call rel32: an instrumentation call";
    case 0xcc: return "an int3 breakpoint (a debugger or tracer)";
    case 0xf4: return "a hlt instruction";
    case 0x68:
        if (code[5] == 0xc3)
            return "push imm32; ret: another patcher's jump";
        break;
    case 0xff:
        if (code[1] == 0x25)
            return "jmp *rel32(%rip): another patcher's indirect jump";
        break;
    case 0x0f:
        if (code[1] == 0x0b)
            return "a ud2 trap";
        break;
    case 0x48:
        if (code[1] == 0xb8 && code[10] == 0xff && code[11] == 0xe0)
            return "movabs $imm64, %rax; jmp *%rax: a UCX-style patch";
        break;
    case 0x49:
        if (code[1] == 0xbb && code[10] == 0x41 && code[11] == 0xff && code[12] == 0xe3)
            return "movabs $imm64, %r11; jmp *%r11: an Open MPI or libfabric patch";
        break;
    default: break;
    }
    return NULL;
}

/* Length of `0f 1f /0` multi-byte NOP forms after the opcode, by ModRM. */
static int long_nop_tail(const uint8_t *modrm, size_t available)
{
    static const struct {
        uint8_t modrm;
        uint8_t length; /* ModRM and what follows it, all zero */
    } forms[] = {{0x00, 1}, {0x40, 2}, {0x44, 3}, {0x80, 5}, {0x84, 6}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (modrm[0] != forms[i].modrm || available < forms[i].length)
            continue;
        for (uint8_t k = 1; k < forms[i].length; k++)
            if (modrm[k] != 0)
                return 0;
        return forms[i].length;
    }
    return 0;
}

int pmca_x86_padding_length(const uint8_t *code, size_t limit)
{
    if (limit == 0)
        return 0;
    if (code[0] == 0x90 || code[0] == 0xcc)
        return 1;
    size_t at = 0;
    while (at < limit && at < 8 && code[at] == 0x66) /* operand-size prefixes */
        at++;
    if (at < limit && code[at] == 0x90)
        return at ? (int)at + 1 : 0;
    if (at < limit && code[at] == 0x2e) /* cs segment prefix of the long forms */
        at++;
    if (at + 2 >= limit || code[at] != 0x0f || code[at + 1] != 0x1f)
        return 0;
    int tail = long_nop_tail(code + at + 2, limit - at - 2);
    return tail ? (int)(at + 2) + tail : 0;
}

int pmca_x86_is_padding(const uint8_t *start, size_t length)
{
    size_t at = 0;
    while (at < length) {
        int step = pmca_x86_padding_length(start + at, length - at);
        if (step == 0)
            return 0;
        at += (size_t)step;
    }
    return 1;
}
