/* verify.c: checks mruby 3.x bytecode (a RITE image loaded by
 * mrb_read_irep_buf) before it may run.
 *
 * mruby's loader checks the image's framing (sizes, section headers), but
 * its VM then trusts the instructions: a register index past the frame, a
 * literal index past the pool or a jump into the middle of an instruction
 * reads or writes outside what was allocated. One damaged byte in a .mrb
 * file could so crash the worker that ran it. The checks below are what
 * the VM assumes of each instruction; mrbc's output always passes them
 * (test_bytecode.py compiles a corpus and checks that it does).
 *
 * What they cannot see is the type of a value at run time: the VM also
 * trusts that an instruction which appends to an array finds one. The
 * register a class body runs on is checked (it is the one the instruction
 * before made a class), the others are not: bytecode stays trusted input
 * (docs/directives.md), the checks turn the likely damage into a refusal. */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/irep.h>
#include <mruby/opcode.h>
#include <mruby/proc.h>

#include "verify.h"

/* Operand layouts of ops.h. */
enum { F_Z, F_B, F_BB, F_BBB, F_BS, F_BSS, F_S, F_W };

static const struct {
    const char *name;
    unsigned char format;
} ops[] = {
#define OPCODE(name, format) {#name, F_##format},
#include <mruby/ops.h>
#undef OPCODE
};

#define OP_COUNT (sizeof ops / sizeof ops[0])

/* Widths in bytes of operands a, b, c by layout, before any OP_EXTn. */
static const unsigned char widths[][3] = {
    [F_Z] = {0, 0, 0},  [F_B] = {1, 0, 0},   [F_BB] = {1, 1, 0}, [F_BBB] = {1, 1, 1},
    [F_BS] = {1, 2, 0}, [F_BSS] = {1, 2, 2}, [F_S] = {2, 0, 0},  [F_W] = {3, 0, 0},
};

typedef struct {
    const mrb_irep *irep;
    unsigned char *starts; /* where an instruction begins: 1, or 2 where
                              nothing may jump (its input is the
                              instruction before) */
    char *why;
    size_t why_len;
    int depth;
    unsigned number;   /* of this irep, depth first: 0 is the script's own */
    unsigned *counter; /* ireps seen so far */
} verifier_t;

/* One decoded instruction. */
typedef struct {
    uint32_t pos;  /* where it begins (its OP_EXTn prefix, if any) */
    uint32_t next; /* where the next one begins */
    unsigned op;
    uint32_t a, b, c;
} insn_t;

static int fail(verifier_t *v, const insn_t *in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(verifier_t *v, const insn_t *in, const char *fmt, ...)
{
    va_list ap;
    int n = 0;

    if (v->number) {
        /* a method's, block's or class body's code */
        n = snprintf(v->why, v->why_len, "irep %u: ", v->number);
    }
    if (in && n >= 0 && (size_t)n < v->why_len) {
        int m = snprintf(v->why + n, v->why_len - (size_t)n, "OP_%s at byte %u: ", ops[in->op].name,
                         (unsigned)in->pos);

        n = m < 0 ? m : n + m;
    }
    if (n < 0 || (size_t)n >= v->why_len) {
        return 0;
    }
    va_start(ap, fmt);
    vsnprintf(v->why + n, v->why_len - (size_t)n, fmt, ap);
    va_end(ap);
    return 0;
}

static uint32_t read_n(const mrb_code *p, unsigned width)
{
    uint32_t x = 0;

    while (width--) {
        x = (x << 8) | *p++;
    }
    return x;
}

/* Decodes the instruction at pos as the VM's FETCH_* macros do. */
static int decode(verifier_t *v, uint32_t pos, insn_t *in)
{
    const mrb_irep *irep = v->irep;
    uint32_t p = pos;
    unsigned ext = 0, wa, wb, wc, f;

    in->pos = pos;
    in->op = irep->iseq[p++];
    if (in->op >= OP_COUNT) {
        in->op = OP_NOP;
        return fail(v, NULL, "unknown instruction %u at byte %u", irep->iseq[pos], (unsigned)pos);
    }
    if (in->op == OP_EXT1 || in->op == OP_EXT2 || in->op == OP_EXT3) {
        ext = in->op - OP_EXT1 + 1;
        if (p >= irep->ilen) {
            return fail(v, in, "the code ends after it");
        }
        in->op = irep->iseq[p++];
        if (in->op >= OP_COUNT || in->op == OP_EXT1 || in->op == OP_EXT2 || in->op == OP_EXT3) {
            in->op = OP_NOP;
            return fail(v, NULL, "invalid instruction %u after OP_EXT%u at byte %u", irep->iseq[pos + 1], ext,
                        (unsigned)pos);
        }
    }
    f = ops[in->op].format;
    wa = widths[f][0];
    wb = widths[f][1];
    wc = widths[f][2];
    /* OP_EXT1 widens a, OP_EXT2 b, OP_EXT3 both; a lone B operand is
     * widened by OP_EXT1 only (FETCH_B_3 is FETCH_B). */
    if (wa == 1 && (ext == 1 || (ext == 3 && f != F_B))) {
        wa = 2;
    }
    if (wb == 1 && (ext == 2 || ext == 3)) {
        wb = 2;
    }
    if (irep->ilen - p < wa + wb + wc) {
        return fail(v, in, "the code ends inside it");
    }
    in->a = read_n(irep->iseq + p, wa);
    in->b = read_n(irep->iseq + p + wa, wb);
    in->c = read_n(irep->iseq + p + wa + wb, wc);
    in->next = p + wa + wb + wc;
    return 1;
}

/* The registers an instruction uses must lie in its frame: nregs of them,
 * plus the one after, which the VM always allocates too (it makes room for
 * one more register than it is asked) and mrbc uses (a method's body is
 * made in the register after the frame before OP_DEF takes it). */
static int regs(verifier_t *v, const insn_t *in, uint32_t highest)
{
    if (highest > v->irep->nregs) {
        return fail(v, in, "register %u is outside its frame of %u registers", (unsigned)highest,
                    (unsigned)v->irep->nregs);
    }
    return 1;
}

static int sym(verifier_t *v, const insn_t *in, uint32_t i)
{
    if (i >= v->irep->slen) {
        return fail(v, in, "symbol %u of %u", (unsigned)i, (unsigned)v->irep->slen);
    }
    return 1;
}

static int pool(verifier_t *v, const insn_t *in, uint32_t i, int string)
{
    if (i >= v->irep->plen) {
        return fail(v, in, "literal %u of %u", (unsigned)i, (unsigned)v->irep->plen);
    }
    if (string && (v->irep->pool[i].tt & IREP_TT_NFLAG)) {
        return fail(v, in, "literal %u is a number, not a string", (unsigned)i);
    }
    return 1;
}

static int rep(verifier_t *v, const insn_t *in, uint32_t i)
{
    if (i >= v->irep->rlen) {
        return fail(v, in, "child irep %u of %u", (unsigned)i, (unsigned)v->irep->rlen);
    }
    return 1;
}

/* A jump by a signed 16-bit offset from the next instruction. Where it
 * lands is checked once every instruction start is known. */
static int jump(verifier_t *v, const insn_t *in, uint32_t offset, int64_t *target)
{
    *target = (int64_t)in->next + (int16_t)(uint16_t)offset;
    if (*target < 0 || *target >= (int64_t)v->irep->ilen) {
        return fail(v, in, "jumps to byte %lld, outside the code", (long long)*target);
    }
    return 1;
}

/* The registers after a the send-like instructions use, by their argument
 * count c (n | k << 4, 15 meaning packed in one): the arguments, the
 * keywords, then the block. */
static uint32_t args_end(uint32_t c)
{
    uint32_t n = c & 0xf, k = (c >> 4) & 0xf;

    return (n == 15 ? 1 : n) + (k == 15 ? 1 : 2 * k) + 1;
}

/* ARGARY and BLKPUSH with lv 0 read the method's own arguments. */
static int frame_args(verifier_t *v, const insn_t *in)
{
    uint32_t m1 = (in->b >> 11) & 0x3f, r = (in->b >> 10) & 1, m2 = (in->b >> 5) & 0x1f,
             kd = (in->b >> 4) & 1;

    return (in->b & 0xf) != 0 || regs(v, in, 1 + m1 + r + m2 + kd);
}

/* OP_ENTER: the arguments, keywords and block in the frame; each optional
 * argument's initializer is skipped by stepping over one 3-byte OP_JMP. */
static int enter(verifier_t *v, const insn_t *in)
{
    uint32_t aspec = in->a;
    uint32_t len =
        MRB_ASPEC_REQ(aspec) + MRB_ASPEC_OPT(aspec) + MRB_ASPEC_REST(aspec) + MRB_ASPEC_POST(aspec);
    uint32_t kd = (MRB_ASPEC_KEY(aspec) > 0 || MRB_ASPEC_KDICT(aspec)) ? 1 : 0;
    uint32_t i, p = in->next;

    if (!regs(v, in, len + kd + 1)) {
        return 0;
    }
    for (i = 0; i < MRB_ASPEC_OPT(aspec); i++, p += 3) {
        if (p + 3 > v->irep->ilen || v->irep->iseq[p] != OP_JMP) {
            return fail(v, in, "optional argument %u has no OP_JMP after it", (unsigned)i + 1);
        }
    }
    return 1;
}

/* OP_DEF takes R[a] for a class and R[a+1] for a method body without
 * looking: mrbc makes them just before, with OP_TCLASS (or OP_SCLASS, for
 * def self.x) and OP_METHOD. */
static int def(verifier_t *v, const insn_t *in, const insn_t *prev, const insn_t *prev2)
{
    if (prev == NULL || prev2 == NULL || prev->op != OP_METHOD || prev->a != in->a + 1 ||
        (prev2->op != OP_TCLASS && prev2->op != OP_SCLASS) || prev2->a != in->a) {
        return fail(v, in, "its registers do not hold the class and method just made");
    }
    v->starts[in->pos] = v->starts[prev->pos] = 2;
    return sym(v, in, in->b);
}

/* The operands of one instruction. prev and prev2 are the two instructions
 * before it in the code, or NULL. */
static int operands(verifier_t *v, const insn_t *in, const insn_t *prev, const insn_t *prev2, int64_t *target)
{
    uint32_t a = in->a, b = in->b, c = in->c;

    switch (in->op) {
    case OP_NOP:
    case OP_KEYEND:
    case OP_STOP:
        return 1;
    case OP_MOVE:
    case OP_RESCUE:
    case OP_AREF:
    case OP_ASET:
        return regs(v, in, a > b ? a : b);
    case OP_LOADL:
        return regs(v, in, a) && pool(v, in, b, 0);
    case OP_SYMBOL:
    case OP_STRING:
        return regs(v, in, a) && pool(v, in, b, 1);
    case OP_ERR:
        return pool(v, in, a, 1);
    case OP_LOADSYM:
    case OP_GETGV:
    case OP_SETGV:
    case OP_GETSV:
    case OP_SETSV:
    case OP_GETIV:
    case OP_SETIV:
    case OP_GETCV:
    case OP_SETCV:
    case OP_GETCONST:
    case OP_SETCONST:
    case OP_GETMCNST:
    case OP_KEY_P:
    case OP_KARG:
    case OP_MODULE:
        return regs(v, in, a) && sym(v, in, b);
    case OP_DEF:
        return def(v, in, prev, prev2);
    case OP_SETMCNST:
    case OP_CLASS:
        return regs(v, in, a + 1) && sym(v, in, b);
    case OP_ALIAS:
        return sym(v, in, a) && sym(v, in, b);
    case OP_UNDEF:
        return sym(v, in, a);
    case OP_LOADI:
    case OP_LOADINEG:
    case OP_LOADI__1:
    case OP_LOADI_0:
    case OP_LOADI_1:
    case OP_LOADI_2:
    case OP_LOADI_3:
    case OP_LOADI_4:
    case OP_LOADI_5:
    case OP_LOADI_6:
    case OP_LOADI_7:
    case OP_LOADI16:
    case OP_LOADI32:
    case OP_LOADNIL:
    case OP_LOADSELF:
    case OP_LOADT:
    case OP_LOADF:
    case OP_GETUPVAR: /* the VM checks b against the env */
    case OP_SETUPVAR:
    case OP_EXCEPT:
    case OP_RAISEIF:
    case OP_RETURN:
    case OP_RETURN_BLK:
    case OP_BREAK:
    case OP_ARYDUP:
    case OP_INTERN:
    case OP_OCLASS:
    case OP_SCLASS:
    case OP_TCLASS:
        return regs(v, in, a);
    case OP_STRCAT:
    case OP_ARYCAT:
    case OP_HASHCAT:
    case OP_RANGE_INC:
    case OP_RANGE_EXC:
        return regs(v, in, a + 1);
    /* These fall back to a method call with one argument (a+1) and the
     * block slot after it (a+2); SETIDX with two. */
    case OP_GETIDX:
    case OP_ADD:
    case OP_ADDI:
    case OP_SUB:
    case OP_SUBI:
    case OP_MUL:
    case OP_DIV:
    case OP_EQ:
    case OP_LT:
    case OP_LE:
    case OP_GT:
    case OP_GE:
        return regs(v, in, a + 2);
    case OP_SETIDX:
        return regs(v, in, a + 3);
    case OP_JMP:
    case OP_JMPUW:
        return jump(v, in, a, target);
    case OP_JMPIF:
    case OP_JMPNOT:
    case OP_JMPNIL:
        return regs(v, in, a) && jump(v, in, b, target);
    case OP_SSEND:
    case OP_SSENDB:
    case OP_SEND:
    case OP_SENDB:
        return sym(v, in, b) && regs(v, in, a + args_end(c));
    case OP_SUPER:
        return regs(v, in, a + args_end(b));
    case OP_ARGARY:
        return regs(v, in, a + 1 + ((b >> 4) & 1)) && frame_args(v, in);
    case OP_BLKPUSH:
        return regs(v, in, a) && frame_args(v, in);
    case OP_ENTER:
        return enter(v, in);
    case OP_ARRAY:
        return regs(v, in, b ? a + b - 1 : a);
    case OP_ARRAY2:
        return regs(v, in, a) && regs(v, in, c ? b + c - 1 : b);
    case OP_ARYPUSH:
    case OP_APOST:
        return regs(v, in, a + (in->op == OP_APOST ? c : b));
    case OP_HASH:
        return regs(v, in, b ? a + 2 * b - 1 : a);
    case OP_HASHADD:
        return regs(v, in, a + 2 * b);
    case OP_LAMBDA:
    case OP_BLOCK:
    case OP_METHOD:
        return regs(v, in, a) && rep(v, in, b);
    case OP_EXEC:
        /* The VM takes R[a] for a class without looking. */
        if (prev == NULL || prev->a != a ||
            (prev->op != OP_CLASS && prev->op != OP_MODULE && prev->op != OP_SCLASS)) {
            return fail(v, in, "its register does not hold the class just opened");
        }
        v->starts[in->pos] = 2;
        return regs(v, in, a) && rep(v, in, b);
    default: /* OP_CALL (only in Proc#call's own code), OP_DEBUG */
        return fail(v, in, "mrbc does not emit it");
    }
}

/* Instructions after which the VM does not go on to the next one. */
static int ends_flow(unsigned op)
{
    return op == OP_RETURN || op == OP_RETURN_BLK || op == OP_BREAK || op == OP_STOP || op == OP_JMP ||
           op == OP_JMPUW || op == OP_ERR;
}

/* Where a jump (from: its byte) or an exception handler (from: its
 * number) goes. */
static int landing(verifier_t *v, int64_t target, int handler, uint32_t from)
{
    if (target < 0 || target >= (int64_t)v->irep->ilen || v->starts[target] != 1) {
        return fail(v, NULL, "%s %u goes to byte %lld, not to the start of an instruction it may start at",
                    handler ? "exception handler" : "the jump at byte", (unsigned)from, (long long)target);
    }
    return 1;
}

static uint32_t unpack32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int handlers(verifier_t *v)
{
    const mrb_irep *irep = v->irep;
    const struct mrb_irep_catch_handler *h = mrb_irep_catch_handler_table(irep);
    uint16_t i;

    for (i = 0; i < irep->clen; i++) {
        uint32_t begin = unpack32(h[i].begin), end = unpack32(h[i].end);

        if (h[i].type != MRB_CATCH_RESCUE && h[i].type != MRB_CATCH_ENSURE) {
            return fail(v, NULL, "exception handler %u has an unknown type", (unsigned)i);
        }
        if (begin > end || end > irep->ilen) {
            return fail(v, NULL, "exception handler %u covers bytes %u-%u, outside the code", (unsigned)i,
                        (unsigned)begin, (unsigned)end);
        }
        if (!landing(v, unpack32(h[i].target), 1, i)) {
            return 0;
        }
    }
    return 1;
}

static int code(verifier_t *v)
{
    const mrb_irep *irep = v->irep;
    insn_t in, prev[2];
    int have_prev = 0;
    uint32_t pos = 0, i;
    int64_t *targets;
    uint32_t *from;
    size_t njumps = 0;
    int ok = 1;

    if (irep->ilen == 0) {
        return fail(v, NULL, "no code");
    }
    if (irep->nlocals > irep->nregs) {
        return fail(v, NULL, "%u local variables in a frame of %u registers", (unsigned)irep->nlocals,
                    (unsigned)irep->nregs);
    }
    /* At most one jump per 3 bytes of code. */
    targets = malloc(sizeof *targets * (irep->ilen / 3 + 1));
    from = malloc(sizeof *from * (irep->ilen / 3 + 1));
    if (targets == NULL || from == NULL) {
        free(targets);
        free(from);
        return fail(v, NULL, "out of memory");
    }
    while (ok && pos < irep->ilen) {
        int64_t target = -1;

        v->starts[pos] = 1;
        ok = decode(v, pos, &in) &&
             operands(v, &in, have_prev ? &prev[0] : NULL, have_prev > 1 ? &prev[1] : NULL, &target);
        if (ok && target >= 0) {
            targets[njumps] = target;
            from[njumps++] = pos;
        }
        prev[1] = prev[0];
        prev[0] = in;
        have_prev += have_prev < 2;
        pos = in.next;
    }
    if (ok && !ends_flow(in.op)) {
        ok = fail(v, &in, "the code ends without returning");
    }
    for (i = 0; ok && i < njumps; i++) {
        ok = landing(v, targets[i], 0, from[i]);
    }
    free(targets);
    free(from);
    return ok && handlers(v);
}

static int verify(verifier_t *v, const mrb_irep *irep)
{
    verifier_t own = *v;
    uint16_t i;
    int ok;

    if (v->depth > 256) {
        return fail(v, NULL, "ireps nested too deeply");
    }
    own.irep = irep;
    own.depth = v->depth + 1;
    own.number = (*v->counter)++;
    own.starts = calloc(irep->ilen ? irep->ilen : 1, 1);
    if (own.starts == NULL) {
        return fail(v, NULL, "out of memory");
    }
    ok = code(&own);
    free(own.starts);
    for (i = 0; ok && i < irep->rlen; i++) {
        if (irep->reps[i] == NULL) {
            return fail(v, NULL, "child irep %u is missing", (unsigned)i);
        }
        ok = verify(&own, irep->reps[i]);
    }
    return ok;
}

int mm_verify_irep(const mrb_irep *irep, char *why, size_t why_len)
{
    verifier_t v;
    unsigned counter = 0;

    memset(&v, 0, sizeof v);
    v.counter = &counter;
    v.why = why;
    v.why_len = why_len;
    if (why_len) {
        why[0] = '\0';
    }
    return verify(&v, irep);
}
