/* verify.c: checks mruby 3.x bytecode (a RITE image loaded by
 * mrb_read_irep_buf) before it may run.
 *
 * The image's framing (lengths, sections, tables) is checked before
 * mruby's loader reads it (rite.c); mruby's VM then trusts the
 * instructions: a register index past the frame, a
 * literal index past the pool or a jump into the middle of an instruction
 * reads or writes outside what was allocated. One damaged byte in a .mrb
 * file could so crash the worker that ran it. The checks below are what
 * the VM assumes of each instruction; mrbc's output always passes them
 * (test_bytecode.py compiles a corpus and checks that it does).
 *
 * The VM also trusts the kind of value some instructions find in a
 * register: OP_STRCAT appends to a String, OP_ARYPUSH to an Array, OP_DEF
 * defines a method body in a class. The instructions that take a value
 * without looking are checked: OP_DEF and OP_EXEC by the instruction just
 * before them; OP_STRCAT, OP_INTERN, OP_ARYPUSH, OP_ARYCAT, OP_RAISEIF and
 * a call with its arguments packed in an Array by a second pass that
 * follows what each register may hold along every path (kinds()).
 * The rest of the VM's instructions look at what they get.
 *
 * A frame's registers may also be variables of another frame: a block
 * made a method (define_method) and called by an arithmetic instruction
 * on a local variable has its frame over the caller's locals, which are
 * its environment. OP_SETUPVAR is taken to change what it may so reach of
 * its own frame; a send in a local register is refused (mrbc sends in
 * temporaries). What a block nested in such a block writes of the frame
 * below stays unchecked. Bytecode stays trusted input (docs/directives.md). */

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

typedef struct verifier {
    const mrb_irep *irep;
    unsigned char *starts; /* where an instruction begins: 1, or 2 where
                              nothing may jump (its input is the
                              instruction before) */
    char *why;
    size_t why_len;
    int depth;
    unsigned number;               /* of this irep, depth first: 0 is the script's own */
    const struct verifier *parent; /* the irep this one is nested in, or NULL */
    unsigned *counter;             /* ireps seen so far */
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
 * one more register than it is asked; run.c sees to it for the script's
 * fiber) and mrbc uses (`def self.x` makes its method there). */
static int regs(verifier_t *v, const insn_t *in, uint32_t highest)
{
    if (highest > v->irep->nregs) {
        return fail(v, in, "register %u is outside its frame of %u registers", (unsigned)highest,
                    (unsigned)v->irep->nregs);
    }
    return 1;
}

/* A symbol of the irep's table. The table may hold the null symbol (0,
 * written as a length of 0xFFFF), which mruby's tables of variables and
 * methods take for an empty slot: an instruction never names it. */
static int sym(verifier_t *v, const insn_t *in, uint32_t i)
{
    if (i >= v->irep->slen) {
        return fail(v, in, "symbol %u of %u", (unsigned)i, (unsigned)v->irep->slen);
    }
    if (v->irep->syms[i] == 0) {
        return fail(v, in, "symbol %u is the null symbol", (unsigned)i);
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

/* Where a jump goes (a signed 16-bit offset from the next instruction),
 * or -1 for an instruction that does not jump. */
static int64_t jump_target(const insn_t *in)
{
    switch (in->op) {
    case OP_JMP:
    case OP_JMPUW:
        return (int64_t)in->next + (int16_t)(uint16_t)in->a;
    case OP_JMPIF:
    case OP_JMPNOT:
    case OP_JMPNIL:
        return (int64_t)in->next + (int16_t)(uint16_t)in->b;
    default:
        return -1;
    }
}

/* A jump stays in the code. Where it lands is checked once every
 * instruction start is known. */
static int jump(verifier_t *v, const insn_t *in)
{
    int64_t target = jump_target(in);

    if (target < 0 || target >= (int64_t)v->irep->ilen) {
        return fail(v, in, "jumps to byte %lld, outside the code", (long long)target);
    }
    return 1;
}

/* How many optional arguments' OP_JMPs an OP_ENTER may skip: it may go on
 * at in->next + 3 * k for k from 1 to that (see enter). */
static uint32_t enter_skips(const insn_t *in)
{
    return in->op == OP_ENTER ? MRB_ASPEC_OPT(in->a) : 0;
}

/* The registers after a the send-like instructions use, by their argument
 * count c (n | k << 4, 15 meaning packed in one): the arguments, the
 * keywords, then the block. */
static uint32_t args_end(uint32_t c)
{
    uint32_t n = c & 0xf, k = (c >> 4) & 0xf;

    return (n == 15 ? 1 : n) + (k == 15 ? 1 : 2 * k) + 1;
}

/* ARGARY and BLKPUSH read a method's arguments: with lv 0 in the frame,
 * else in the variables of the code lv levels out (the VM's own check of
 * those is one short when there are keywords). */
static int frame_args(verifier_t *v, const insn_t *in)
{
    uint32_t m1 = (in->b >> 11) & 0x3f, r = (in->b >> 10) & 1, m2 = (in->b >> 5) & 0x1f,
             kd = (in->b >> 4) & 1, lv = in->b & 0xf;
    const verifier_t *out = v;

    if (lv == 0) {
        return regs(v, in, 1 + m1 + r + m2 + kd);
    }
    while (lv-- > 0 && out) {
        out = out->parent;
    }
    if (out == NULL || out->irep == NULL || 1 + m1 + r + m2 + kd >= out->irep->nlocals) {
        return fail(v, in, "the arguments it reads are not among the variables of the code it names");
    }
    return 1;
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
    if (in->pos != 0) {
        /* The VM would take the frame's arguments for packed ones. */
        return fail(v, in, "not at the start of the code");
    }
    for (i = 0; i < MRB_ASPEC_OPT(aspec); i++, p += 3) {
        if (p + 3 > v->irep->ilen || v->irep->iseq[p] != OP_JMP) {
            return fail(v, in, "optional argument %u has no OP_JMP after it", (unsigned)i + 1);
        }
    }
    if (p >= v->irep->ilen) {
        return fail(v, in, "the code ends after its optional arguments' OP_JMPs");
    }
    if ((len & 15) == 15) {
        /* Run again (redo jumps back to it), it would find its arguments
         * counted as 15 (the VM keeps the count in 4 bits: 31, 47, ... too),
         * which means packed in an Array. */
        v->starts[0] = 2;
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
static int operands(verifier_t *v, const insn_t *in, const insn_t *prev, const insn_t *prev2)
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
        return jump(v, in);
    case OP_JMPIF:
    case OP_JMPNOT:
    case OP_JMPNIL:
        return regs(v, in, a) && jump(v, in);
    case OP_SSEND:
    case OP_SSENDB:
    case OP_SEND:
    case OP_SENDB:
        /* Strictly inside the frame: a block called through OP_CALL gets
         * no more room than the caller's frame had. */
        return sym(v, in, b) && regs(v, in, a + args_end(c) + 1);
    case OP_SUPER:
        return regs(v, in, a + args_end(b) + 1);
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
    default: /* OP_CALL (only in Proc#call's own code), OP_DEBUG, OP_ASET */
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

/* The second pass: what kind of value each register may hold, where an
 * instruction takes one without looking. OP_STRCAT appends to R[a] as a
 * String and OP_INTERN makes a Symbol of it, OP_ARYPUSH appends to an
 * Array, OP_ARYCAT to an Array or nil, OP_RAISEIF raises R[a] if it is not
 * nil, as an exception (OP_EXCEPT's value), and a call with 15 arguments or
 * more finds them in an Array in R[a+1]. Each register's state is the set of kinds it may hold, merged
 * where paths meet; an instruction not modelled leaves ANY where it
 * writes. Code that may run Ruby (a method, a block, to_s) may change the
 * frame's local variables (a block shares them) but not its temporaries,
 * except that a call made by the VM itself (OP_SEND and the instructions
 * that fall back to one, OP_EXEC) runs its method in the registers from
 * R[a] on. */
enum { K_STR = 1, K_ARY = 2, K_EXC = 4, K_NIL = 8, K_ANY = 0xff };

/* A block of code that starts where a jump, a handler or fall-through
 * lands. */
typedef struct {
    uint32_t pos;
    int queued;
    int seen;
} block_t;

typedef struct {
    verifier_t *v;
    block_t *blocks;
    uint32_t nblocks;
    size_t width;    /* registers tracked per state: nregs + 1 */
    uint8_t *states; /* nblocks * width */
    uint32_t *queue; /* blocks to walk, at most one entry each */
    uint32_t queued;
    uint32_t *unwinds; /* where the OP_JMPUWs go */
    uint32_t nunwinds;
    uint64_t work; /* registers merged and handlers looked at so far */
} flow_t;

/* The most work the second pass does on one irep: far more than mrbc's
 * code of a 16 MB script needs, little enough to end in seconds. */
#define MM_VERIFY_WORK (1000ULL * 1000 * 1000)

/* Instructions after which the VM runs no code of this frame before the
 * next one, other than through a block: nothing to clobber. */
static const uint8_t pure_ops[] = {
    OP_NOP,     OP_MOVE,    OP_LOADL,    OP_LOADI,   OP_LOADINEG, OP_LOADI__1, OP_LOADI_0,  OP_LOADI_1,
    OP_LOADI_2, OP_LOADI_3, OP_LOADI_4,  OP_LOADI_5, OP_LOADI_6,  OP_LOADI_7,  OP_LOADI16,  OP_LOADI32,
    OP_LOADSYM, OP_LOADNIL, OP_LOADSELF, OP_LOADT,   OP_LOADF,    OP_GETUPVAR, OP_SETUPVAR, OP_JMP,
    OP_JMPIF,   OP_JMPNOT,  OP_JMPNIL,   OP_EXCEPT,  OP_STRING,   OP_SYMBOL,   OP_ARRAY,    OP_ARRAY2,
    OP_ARYDUP,  OP_LAMBDA,  OP_BLOCK,    OP_METHOD,  OP_OCLASS,   OP_TCLASS,   OP_KEY_P,    OP_STOP,
};

/* The VM calls a method in the registers from R[a]. */
static const uint8_t call_ops[] = {
    OP_SEND, OP_SENDB, OP_SSEND, OP_SSENDB, OP_SUPER, OP_EXEC, OP_ADD, OP_ADDI,   OP_SUB,    OP_SUBI,
    OP_MUL,  OP_DIV,   OP_EQ,    OP_LT,     OP_LE,    OP_GT,   OP_GE,  OP_GETIDX, OP_SETIDX,
};

/* The calls among them that mrbc makes in temporaries only. */
static const uint8_t send_ops[] = {OP_SEND, OP_SENDB, OP_SSEND, OP_SSENDB, OP_SUPER, OP_EXEC};

static int one_of(const uint8_t *set, size_t n, unsigned op)
{
    while (n--) {
        if (set[n] == op) {
            return 1;
        }
    }
    return 0;
}

static void set(uint8_t *st, size_t width, uint32_t from, uint32_t to, uint8_t kind)
{
    for (; from <= to && from < width; from++) {
        st[from] = kind;
    }
}

/* Checks what in takes from st, then makes st what holds after it. */
static int transfer(flow_t *fl, const insn_t *in, uint8_t *st)
{
    size_t w = fl->width;
    uint32_t a = in->a, packed;
    uint8_t need = 0;
    int ruby_first = 0; /* Ruby runs before the instruction takes R[a] */
    const char *what = NULL;

    switch (in->op) {
    case OP_STRCAT:
        ruby_first = 1; /* R[a+1].to_s */
        /* fallthrough */
    case OP_INTERN:
        need = K_STR, what = "a String";
        break;
    case OP_SEND:
    case OP_SENDB:
    case OP_SSEND:
    case OP_SSENDB:
    case OP_SUPER:
        /* 15 arguments or more come packed in an Array, which the method
         * takes as one. */
        packed = in->op == OP_SUPER ? in->b : in->c;
        if ((packed & 0xf) == 15) {
            a++;
            need = K_ARY, what = "the Array of packed arguments";
            ruby_first = 1; /* the keywords, the block's to_proc */
        }
        break;
    case OP_ARYPUSH:
        need = K_ARY, what = "an Array";
        break;
    case OP_ARYCAT:
        need = K_ARY | K_NIL, what = "an Array or nil";
        ruby_first = 1; /* R[a+1].to_a */
        break;
    case OP_RAISEIF:
        need = K_EXC | K_NIL, what = "an exception or nil";
        break;
    }
    if (need && a < w && (st[a] & ~need)) {
        return fail(fl->v, in, "register %u may not hold %s", (unsigned)a, what);
    }
    /* Ruby that runs before R[a] is taken may change a local variable
     * through a block: mrbc gives these instructions temporaries. */
    if (ruby_first && a < fl->v->irep->nlocals) {
        return fail(fl->v, in, "register %u is a local variable", (unsigned)a);
    }
    a = in->a;
    /* A method called in R[a] has its frame from there: below the last
     * local, a block's frame would overlap the variables it reaches as its
     * environment, and write its own registers through them. mrbc sends in
     * temporaries (its arithmetic, which falls back to a call, works on
     * locals: see OP_SETUPVAR below). */
    if (one_of(send_ops, sizeof send_ops, in->op) && a < fl->v->irep->nlocals) {
        return fail(fl->v, in, "calls a method in register %u, a local variable", (unsigned)a);
    }
    if (!one_of(pure_ops, sizeof pure_ops, in->op)) {
        /* Ruby the VM runs from C (to_s, a block) may change the locals
         * (and self), and runs in the registers after the frame's last. */
        set(st, w, 0, fl->v->irep->nlocals ? fl->v->irep->nlocals - 1u : 0, K_ANY);
        st[w - 1] = K_ANY;
    }
    if (one_of(call_ops, sizeof call_ops, in->op)) {
        set(st, w, a, (uint32_t)w - 1, K_ANY);
    }
    switch (in->op) {
    case OP_STRING:
    case OP_STRCAT:
        set(st, w, a, a, K_STR);
        break;
    case OP_ARRAY:
    case OP_ARRAY2:
    case OP_ARYDUP:
    case OP_ARYCAT:
    case OP_ARYPUSH:
        set(st, w, a, a, K_ARY);
        break;
    case OP_EXCEPT:
        set(st, w, a, a, K_EXC | K_NIL);
        break;
    case OP_LOADNIL:
        set(st, w, a, a, K_NIL);
        break;
    case OP_MOVE:
        set(st, w, a, a, in->b < w ? st[in->b] : K_ANY);
        break;
    case OP_RESCUE:
        set(st, w, in->b, in->b, K_ANY);
        break;
    case OP_APOST:
        set(st, w, a, a + in->c, K_ANY);
        break;
    case OP_ARGARY:
        set(st, w, a, a + 2, K_ANY);
        set(st, w, a, a, K_ARY);
        break;
    case OP_ENTER:
        set(st, w, 0, (uint32_t)w - 1, K_ANY);
        break;
    case OP_SETUPVAR:
        /* It writes variable b of an environment: this frame's own R[b]
         * (code without an environment of its own finds its frame's, once
         * OP_BLOCK made one), or, for a block whose frame was made at R[k]
         * of that environment's frame (an arithmetic instruction on a local
         * falls back to calling a method, which may be a block), its
         * register b - k: one of 0..b either way. */
        set(st, w, 0, in->b, K_ANY);
        break;
    case OP_NOP:
    case OP_JMP:
    case OP_JMPIF:
    case OP_JMPNOT:
    case OP_JMPNIL:
    case OP_JMPUW:
    case OP_RAISEIF:
    case OP_RETURN:
    case OP_RETURN_BLK:
    case OP_BREAK:
    case OP_STOP:
    case OP_SETGV:
    case OP_SETSV:
    case OP_SETIV:
    case OP_SETCV:
    case OP_SETCONST:
    case OP_SETMCNST:
    case OP_ALIAS:
    case OP_UNDEF:
    case OP_KEYEND:
    case OP_ERR:
    case OP_HASHADD:
        break;
    default:
        set(st, w, a, a, K_ANY);
        break;
    }
    return 1;
}

static uint32_t block_at(const flow_t *fl, uint32_t pos)
{
    uint32_t lo = 0, hi = fl->nblocks;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (fl->blocks[mid].pos < pos) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo; /* the block starting at pos: every landing starts one */
}

/* Merges st into the state the block at pos starts with. */
static void flow_to(flow_t *fl, uint32_t pos, const uint8_t *st)
{
    uint32_t b = block_at(fl, pos);
    uint8_t *to = fl->states + (size_t)b * fl->width;
    int changed = !fl->blocks[b].seen;
    size_t i;

    for (i = 0; i < fl->width; i++) {
        uint8_t m = fl->blocks[b].seen ? (uint8_t)(to[i] | st[i]) : st[i];

        changed |= m != to[i];
        to[i] = m;
    }
    fl->blocks[b].seen = 1;
    fl->work += fl->width;
    if (changed && !fl->blocks[b].queued) {
        fl->blocks[b].queued = 1;
        fl->queue[fl->queued++] = b;
    }
}

/* The handlers that cover an instruction, as the VM finds them: by where
 * the instruction ends (next). */
static void to_handlers(flow_t *fl, uint32_t next, const uint8_t *st)
{
    const mrb_irep *irep = fl->v->irep;
    const struct mrb_irep_catch_handler *h = mrb_irep_catch_handler_table(irep);
    uint16_t i;

    for (i = 0; i < irep->clen; i++) {
        if (unpack32(h[i].begin) < next && next <= unpack32(h[i].end)) {
            flow_to(fl, unpack32(h[i].target), st);
        }
    }
    fl->work += irep->clen;
}

static int walk(flow_t *fl, uint32_t b, uint8_t *st)
{
    verifier_t *v = fl->v;
    uint32_t pos = fl->blocks[b].pos;
    uint32_t end = b + 1 < fl->nblocks ? fl->blocks[b + 1].pos : v->irep->ilen;
    insn_t in;

    memcpy(st, fl->states + (size_t)b * fl->width, fl->width);
    while (pos < end) {
        int64_t target;
        uint32_t k;

        if (!decode(v, pos, &in)) {
            return 0;
        }
        target = jump_target(&in);
        /* An exception lands in a handler with the registers as they were
         * before the instruction or after it (a call's method has run). */
        to_handlers(fl, in.next, st);
        if (!transfer(fl, &in, st)) {
            return 0;
        }
        to_handlers(fl, in.next, st);
        if (in.op == OP_RAISEIF) {
            /* re-raising a break out of an ensure goes on to where the
             * OP_JMPUW it interrupted jumps */
            for (k = 0; k < fl->nunwinds; k++) {
                flow_to(fl, fl->unwinds[k], st);
            }
        }
        if (fl->work > MM_VERIFY_WORK) {
            return fail(v, NULL, "too complex to check");
        }
        if (target >= 0) {
            flow_to(fl, (uint32_t)target, st);
        }
        for (k = 1; k <= enter_skips(&in); k++) {
            flow_to(fl, in.next + 3 * k, st);
        }
        if (ends_flow(in.op)) {
            return 1;
        }
        pos = in.next;
    }
    if (pos < v->irep->ilen) {
        flow_to(fl, pos, st);
    }
    return 1;
}

/* Adds pos to the block starts (marks), once. */
static void mark(uint8_t *marks, uint32_t pos, uint32_t ilen, uint32_t *count)
{
    if (pos < ilen && !marks[pos]) {
        marks[pos] = 1;
        (*count)++;
    }
}

static int kinds(verifier_t *v)
{
    const mrb_irep *irep = v->irep;
    const struct mrb_irep_catch_handler *h = mrb_irep_catch_handler_table(irep);
    flow_t fl;
    uint8_t *marks, *st = NULL;
    uint32_t pos = 0, count = 0, i, n = 0;
    insn_t in;
    int ok = 1;

    memset(&fl, 0, sizeof fl);
    fl.v = v;
    fl.width = (size_t)irep->nregs + 1;
    marks = calloc(irep->ilen, 1);
    /* at most one jump per 3 bytes of code */
    fl.unwinds = calloc(irep->ilen / 3 + 1, sizeof *fl.unwinds);
    if (marks == NULL || fl.unwinds == NULL) {
        free(marks);
        free(fl.unwinds);
        return fail(v, NULL, "out of memory");
    }
    mark(marks, 0, irep->ilen, &count);
    for (i = 0; i < irep->clen; i++) {
        mark(marks, unpack32(h[i].target), irep->ilen, &count);
    }
    /* Blocks start where the code does, where an exception, a jump or an
     * OP_ENTER's skip lands, and after a jump. */
    for (; pos < irep->ilen && decode(v, pos, &in); pos = in.next) {
        int64_t target = jump_target(&in);
        uint32_t k;

        for (k = 1; k <= enter_skips(&in); k++) {
            mark(marks, in.next + 3 * k, irep->ilen, &count);
        }
        if (target >= 0) {
            mark(marks, (uint32_t)target, irep->ilen, &count);
            mark(marks, in.next, irep->ilen, &count);
        }
        if (in.op == OP_JMPUW) {
            fl.unwinds[fl.nunwinds++] = (uint32_t)target;
        }
    }
    /* The states take a byte per register per block. */
    if ((uint64_t)count * fl.width > 64u * 1024 * 1024) {
        ok = fail(v, NULL, "too large to check: %u blocks of %u registers", (unsigned)count,
                  (unsigned)irep->nregs);
        goto done;
    }
    fl.blocks = calloc(count, sizeof *fl.blocks);
    fl.states = calloc(count, fl.width);
    fl.queue = calloc(count, sizeof *fl.queue);
    st = malloc(fl.width);
    if (fl.blocks == NULL || fl.states == NULL || fl.queue == NULL || st == NULL) {
        ok = fail(v, NULL, "out of memory");
        goto done;
    }
    for (pos = 0; pos < irep->ilen; pos++) {
        if (marks[pos]) {
            fl.blocks[n++].pos = pos;
        }
    }
    fl.nblocks = n;
    /* At the start, anything (the arguments). */
    memset(st, K_ANY, fl.width);
    flow_to(&fl, 0, st);
    while (ok && fl.queued) {
        uint32_t b = fl.queue[--fl.queued];

        fl.blocks[b].queued = 0;
        ok = walk(&fl, b, st);
    }
done:
    free(marks);
    free(fl.blocks);
    free(fl.states);
    free(fl.queue);
    free(fl.unwinds);
    free(st);
    return ok;
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
    if (irep->nregs == 0) {
        /* R0 is self; OP_EXEC clears nregs - 1 registers. */
        return fail(v, NULL, "a frame of no registers");
    }
    if (irep->nlocals > irep->nregs) {
        return fail(v, NULL, "%u local variables in a frame of %u registers", (unsigned)irep->nlocals,
                    (unsigned)irep->nregs);
    }
    /* At most one jump per 3 bytes of code, and as many landings after an
     * OP_ENTER, which skips its OP_JMPs. */
    targets = malloc(sizeof *targets * (2 * (irep->ilen / 3) + 2));
    from = malloc(sizeof *from * (2 * (irep->ilen / 3) + 2));
    if (targets == NULL || from == NULL) {
        free(targets);
        free(from);
        return fail(v, NULL, "out of memory");
    }
    while (ok && pos < irep->ilen) {
        uint32_t k;

        v->starts[pos] = 1;
        ok = decode(v, pos, &in) &&
             operands(v, &in, have_prev ? &prev[0] : NULL, have_prev > 1 ? &prev[1] : NULL);
        if (ok && jump_target(&in) >= 0) {
            targets[njumps] = jump_target(&in);
            from[njumps++] = pos;
        }
        for (k = 1; ok && k <= enter_skips(&in); k++) {
            targets[njumps] = in.next + 3 * k;
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
    return ok && handlers(v) && kinds(v);
}

static int verify(verifier_t *v, const mrb_irep *irep)
{
    verifier_t own = *v;
    uint16_t i;
    int ok;

    if (v->depth > MM_VERIFY_DEPTH_MAX) {
        return fail(v, NULL, "ireps nested too deeply");
    }
    own.irep = irep;
    own.depth = v->depth + 1;
    own.number = (*v->counter)++;
    own.parent = v->irep ? v : NULL;
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
