/* x86_64 prologue and padding recognition (x86_decode.c). */
#ifndef PMCA_X86_DECODE_H
#define PMCA_X86_DECODE_H

#include <stddef.h>
#include <stdint.h>

/* 1 if code starts with endbr64 (f3 0f 1e fa). */
int pmca_x86_is_endbr64(const uint8_t *code);

/* Length of the first instruction if it is on the prologue whitelist, else 0.
 * Reads at most 16 bytes. */
int pmca_x86_whitelisted_length(const uint8_t *code);

/* A description of another patcher's (or a debugger's) code at `code`, or
 * NULL when none is recognised.  Reads at most 16 bytes. */
const char *pmca_x86_foreign_patch(const uint8_t *code);

/* Length of the NOP or INT3 instruction at `code`, 0 if it is not one. */
int pmca_x86_padding_length(const uint8_t *code, size_t limit);

/* 1 if [start, start+length) decodes exactly as NOP/INT3 instructions. */
int pmca_x86_is_padding(const uint8_t *start, size_t length);

#endif
