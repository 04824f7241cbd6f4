/* rite.c: checks the framing of a RITE image (an mrbc output file) before
 * mruby's loader reads it.
 *
 * mruby 3.1's loader (mrb_read_irep_buf) takes the image's own word for
 * many lengths: it reads a record's header, a symbol's length, a
 * local-variable table or a line map without looking where the section
 * ends, and its line lookups later trust that the maps cover the code. One
 * damaged length in a .mrb file can so make it read past the file, or
 * loop. This walks the whole image the way the loader will, and passes it
 * only when every length stays inside its section and every table says
 * what the loader and the debug lookups assume. The code itself is then
 * checked by mm_verify_irep (verify.c). */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mruby.h>
#include <mruby/irep.h>
#include <mruby/debug.h>
#include <mruby/dump.h>

#include "verify.h"

#define BINARY_HEADER  20 /* "RITE", version, size, compiler name and version */
#define SECTION_HEADER 8  /* ident, size */
#define IREP_HEADER    12 /* ident, size, instruction set version */
#define RECORD_HEADER  16 /* size, nlocals, nregs, rlen, clen, ilen */
#define HANDLER_SIZE   13 /* an exception handler's entry */

typedef struct {
    const uint8_t *image;
    char *why;
    size_t why_len;
    const char *section; /* the section being read, for messages */
    unsigned irep;       /* 1 + the irep being read (0 for none), depth first
                            as verify.c counts them */
    const uint8_t *next; /* the next irep record, for the sections after IREP */
} rite_t;

/* A window of the image: p moves on, end does not. */
typedef struct {
    const uint8_t *p, *end;
} cursor_t;

static int fail(rite_t *r, const uint8_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(rite_t *r, const uint8_t *at, const char *fmt, ...)
{
    va_list ap;
    int n = 0;

    if (r->section && r->irep) {
        n = snprintf(r->why, r->why_len, "%s section, irep %u: ", r->section, r->irep - 1);
    } else if (r->section) {
        n = snprintf(r->why, r->why_len, "%s section: ", r->section);
    }
    if (n < 0 || (size_t)n >= r->why_len) {
        return 0;
    }
    va_start(ap, fmt);
    vsnprintf(r->why + n, r->why_len - (size_t)n, fmt, ap);
    va_end(ap);
    n = (int)strlen(r->why);
    if (at && (size_t)n < r->why_len) {
        snprintf(r->why + n, r->why_len - (size_t)n, " (at byte %lu of the file)",
                 (unsigned long)(at - r->image));
    }
    return 0;
}

/* Four bytes of the file that name something (a section, a version), for a
 * message: as they are when printable, else escaped, so that a damaged
 * file writes no control character into the error log. */
typedef struct {
    char s[17];
} name_t;

static name_t name4(const uint8_t *p)
{
    name_t n;
    size_t at = 0;
    int i;

    for (i = 0; i < 4; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f) {
            n.s[at++] = (char)p[i];
        } else {
            at += (size_t)snprintf(n.s + at, sizeof n.s - at, "\\x%02x", p[i]);
        }
    }
    n.s[at] = '\0';
    return n;
}

static uint16_t u16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Takes n bytes from c, starting at *at; 0 when fewer are left. */
static int take(cursor_t *c, size_t n, const uint8_t **at)
{
    *at = c->p;
    if (n > (size_t)(c->end - c->p)) {
        return 0;
    }
    c->p += n;
    return 1;
}

/* Takes n bytes described by what, or fails saying it runs past the end. */
static int need(rite_t *r, cursor_t *c, size_t n, const uint8_t **at, const char *what)
{
    return take(c, n, at) || fail(r, c->p, "%s runs past the end of the section", what);
}

/* Fails saying item i of what runs past the end of the section. */
static int past(rite_t *r, const cursor_t *c, const char *what, unsigned i)
{
    return fail(r, c->p, "%s %u runs past the end of the section", what, i);
}

/* A string of the pool or a symbol: len bytes and the NUL mrbc writes. */
static int string(rite_t *r, cursor_t *c, size_t len, const char *what, unsigned i)
{
    const uint8_t *s;

    if (!take(c, len + 1, &s)) {
        return past(r, c, what, i);
    }
    if (s[len] != '\0') {
        return fail(r, s + len, "%s %u is not terminated", what, i);
    }
    return 1;
}

/* A record ends where its first four bytes say. */
static int record_size(rite_t *r, const uint8_t *rec, const cursor_t *c, uint32_t size)
{
    return (size_t)(c->p - rec) == size || fail(r, rec, "its record says %lu bytes, its contents take %lu",
                                                (unsigned long)size, (unsigned long)(c->p - rec));
}

static int pool(rite_t *r, cursor_t *c)
{
    const uint8_t *h, *d;
    unsigned i, plen;

    if (!need(r, c, 2, &h, "the literal count")) {
        return 0;
    }
    plen = u16(h);
    for (i = 0; i < plen; i++) {
        int whole;

        if (!take(c, 1, &h)) {
            return past(r, c, "literal", i);
        }
        switch (*h) {
        case IREP_TT_STR:
            if (!take(c, 2, &d)) {
                return past(r, c, "literal", i);
            }
            if (!string(r, c, u16(d), "literal", i)) {
                return 0;
            }
            continue;
        case IREP_TT_INT32:
            whole = take(c, 4, &d);
            break;
        case IREP_TT_INT64:
        case IREP_TT_FLOAT:
            whole = take(c, 8, &d);
            break;
        case IREP_TT_BIGINT: /* its length, base, digits, NUL */
            whole = take(c, 1, &d) && take(c, (size_t)d[0] + 2, &d);
            break;
        default:
            return fail(r, h, "literal %u is of unknown type %u", i, *h);
        }
        if (!whole) {
            return past(r, c, "literal", i);
        }
    }
    return 1;
}

static int syms(rite_t *r, cursor_t *c)
{
    const uint8_t *h;
    unsigned i, slen;

    if (!need(r, c, 2, &h, "the symbol count")) {
        return 0;
    }
    slen = u16(h);
    for (i = 0; i < slen; i++) {
        uint16_t len;

        if (!take(c, 2, &h)) {
            return past(r, c, "symbol", i);
        }
        len = u16(h);
        if (len != MRB_DUMP_NULL_SYM_LEN && !string(r, c, len, "symbol", i)) {
            return 0;
        }
    }
    return 1;
}

/* An irep record and, after it, those of the ireps under it. */
static int irep_record(rite_t *r, cursor_t *c, int depth)
{
    const uint8_t *rec = c->p, *h, *code;
    uint32_t size, ilen;
    uint16_t rlen, clen, i;

    r->irep++;
    if (depth > MM_VERIFY_DEPTH_MAX) {
        return fail(r, rec, "ireps nested more than %d deep", MM_VERIFY_DEPTH_MAX);
    }
    if (!need(r, c, RECORD_HEADER, &h, "its header")) {
        return 0;
    }
    size = u32(h);
    rlen = u16(h + 8);
    clen = u16(h + 10);
    ilen = u32(h + 12);
    if (ilen == 0 && clen != 0) {
        return fail(r, h + 10, "%u exception handlers and no code", clen);
    }
    if (ilen != 0 && !need(r, c, (size_t)ilen + (size_t)clen * HANDLER_SIZE, &code, "its code")) {
        return 0;
    }
    if (!pool(r, c) || !syms(r, c)) {
        return 0;
    }
    if (!record_size(r, rec, c, size)) {
        return 0;
    }
    for (i = 0; i < rlen; i++) {
        if (!irep_record(r, c, depth + 1)) {
            return 0;
        }
    }
    return 1;
}

/* The irep whose tables come next in the DBG or LVAR section: the records
 * of the IREP section, depth first as these sections are, each already
 * checked by irep_record. */
typedef struct {
    uint16_t nlocals, rlen;
    uint32_t ilen;
} irep_info_t;

static irep_info_t next_irep(rite_t *r)
{
    irep_info_t i = {u16(r->next + 4), u16(r->next + 8), u32(r->next + 12)};

    r->irep++;
    r->next += u32(r->next);
    return i;
}

/* One varint of a packed line map, as mrb_packed_int_decode reads it: at
 * most five bytes, the last without the high bit. */
static int varint(const uint8_t **p, const uint8_t *end)
{
    int i;

    for (i = 0; i < 5; i++) {
        if (*p >= end) {
            return 0;
        }
        if (!(*(*p)++ & 0x80)) {
            return 1;
        }
    }
    return 1;
}

/* A file's line table: mruby 3.1's mrbc writes packed maps only, pairs of
 * varints (position, line) that mruby's debug.c decodes without looking
 * where the map ends. */
static int lines(rite_t *r, const uint8_t *file)
{
    const uint8_t *p = file + 11, *end = p + u32(file + 6);

    if (file[10] != mrb_debug_line_packed_map) {
        return fail(r, file + 10, "a line table of type %u, not a packed map", file[10]);
    }
    while (p < end) {
        if (!varint(&p, end) || !varint(&p, end)) {
            return fail(r, end, "the packed line map ends inside an entry");
        }
    }
    return 1;
}

static int debug_record(rite_t *r, cursor_t *c, uint16_t nfilenames)
{
    const uint8_t *rec = c->p, *h, *file;
    irep_info_t irep = next_irep(r);
    uint32_t size, flen, f, prev_start = 0, i;

    if (!need(r, c, 6, &h, "its line record")) {
        return 0;
    }
    size = u32(h);
    flen = u16(h + 4);
    /* The lookups find the file of an instruction by binary search,
     * assuming the first starts at 0 and the rest in order. */
    if (flen == 0) {
        return fail(r, h + 4, "a line record of no file");
    }
    for (f = 0; f < flen; f++) {
        uint32_t start;

        if (!need(r, c, 11, &file, "a file's line table")) {
            return 0;
        }
        start = u32(file);
        if (u16(file + 4) >= nfilenames) {
            return fail(r, file + 4, "file name %u of %u", u16(file + 4), nfilenames);
        }
        if ((f == 0 && start != 0) || (f > 0 && start <= prev_start) || start >= irep.ilen) {
            return fail(r, file, "a file's line table starts at byte %lu of the code", (unsigned long)start);
        }
        if (!need(r, c, u32(file + 6), &h, "a file's line table") || !lines(r, file)) {
            return 0;
        }
        prev_start = start;
    }
    if (!record_size(r, rec, c, size)) {
        return 0;
    }
    for (i = 0; i < irep.rlen; i++) {
        if (!debug_record(r, c, nfilenames)) {
            return 0;
        }
    }
    return 1;
}

/* The table of names that starts the DBG section (file names, a 2-byte
 * count) and the LVAR section (variable names, a 4-byte count): each a
 * 2-byte length and the bytes. Their number goes into *n. */
static int names(rite_t *r, cursor_t *c, size_t count_bytes, const char *what, uint32_t *n)
{
    const uint8_t *h;
    uint32_t i;

    if (!need(r, c, count_bytes, &h, "the name count")) {
        return 0;
    }
    *n = count_bytes == 2 ? u16(h) : u32(h);
    for (i = 0; i < *n; i++) {
        if (!take(c, 2, &h) || !take(c, u16(h), &h)) {
            return past(r, c, what, (unsigned)i);
        }
    }
    return 1;
}

static int debug_section(rite_t *r, cursor_t *c)
{
    uint32_t n;

    return names(r, c, 2, "file name", &n) && debug_record(r, c, (uint16_t)n);
}

static int lv_record(rite_t *r, cursor_t *c, uint32_t nsyms)
{
    irep_info_t irep = next_irep(r);
    const uint8_t *h;
    uint32_t i;

    if (irep.nlocals == 0) {
        return fail(r, c->p, "local variable names for an irep of no locals");
    }
    if (!need(r, c, (size_t)(irep.nlocals - 1) * 2, &h, "its local variable names")) {
        return 0;
    }
    for (i = 0; i + 1 < irep.nlocals; i++) {
        uint16_t sym = u16(h + 2 * i);

        if (sym != RITE_LV_NULL_MARK && sym >= nsyms) {
            return fail(r, h + 2 * i, "local variable name %u of %lu", sym, (unsigned long)nsyms);
        }
    }
    for (i = 0; i < irep.rlen; i++) {
        if (!lv_record(r, c, nsyms)) {
            return 0;
        }
    }
    return 1;
}

static int lv_section(rite_t *r, cursor_t *c)
{
    uint32_t n;

    return names(r, c, 4, "name", &n) && lv_record(r, c, n);
}

int mm_verify_rite(const uint8_t *bin, size_t len, char *why, size_t why_len)
{
    rite_t r = {bin, why, why_len, NULL, 0, NULL};
    cursor_t c;
    const uint8_t *records = NULL;
    int debug = 0, lv = 0;
    uint32_t size;

    if (why_len) {
        why[0] = '\0';
    }
    if (len < BINARY_HEADER || memcmp(bin, RITE_BINARY_IDENT, 4) != 0) {
        return fail(&r, NULL, "not an mruby bytecode file");
    }
    /* A file of another mruby: its instructions are not this VM's. */
    if (memcmp(bin + 4, RITE_BINARY_MAJOR_VER, 2) != 0 || memcmp(bin + 6, RITE_BINARY_MINOR_VER, 2) > 0) {
        return fail(&r, NULL, "format %s, not this mruby's %s: compile it with this mruby's mrbc",
                    name4(bin + 4).s, RITE_BINARY_FORMAT_VER);
    }
    size = u32(bin + 8);
    c.p = bin + BINARY_HEADER;
    c.end = bin + len;
    if (size != len) {
        return fail(&r, NULL, "the file is %lu bytes, its header says %lu", (unsigned long)len,
                    (unsigned long)size);
    }
    while (c.p < c.end) {
        const uint8_t *h = c.p, *body;
        uint32_t section_size;
        cursor_t s;
        int ok;

        if (!take(&c, SECTION_HEADER, &body)) {
            return fail(&r, h, "a section header runs past the end of the file");
        }
        section_size = u32(h + 4);
        if (section_size < SECTION_HEADER || section_size - SECTION_HEADER > (size_t)(c.end - c.p)) {
            return fail(&r, h, "section %s of %lu bytes does not fit in the file", name4(h).s,
                        (unsigned long)section_size);
        }
        s.p = c.p;
        s.end = h + section_size;
        c.p = s.end;
        r.irep = 0;
        if (memcmp(h, RITE_BINARY_EOF, 4) == 0) {
            if (records == NULL) {
                return fail(&r, h, "the END section comes before the code");
            }
            if (c.p != c.end) {
                return fail(&r, c.p, "%lu bytes after the END section", (unsigned long)(c.end - c.p));
            }
            return 1;
        }
        if (memcmp(h, RITE_SECTION_IREP_IDENT, 4) == 0 && records == NULL) {
            r.section = "IREP";
            if (!need(&r, &s, 4, &body, "the instruction set version")) {
                return 0;
            }
            if (memcmp(body, RITE_VM_VER, 4) != 0) {
                r.section = NULL;
                return fail(&r, body, "instruction set %s, not this mruby's %s", name4(body).s, RITE_VM_VER);
            }
            records = s.p;
            ok = irep_record(&r, &s, 0);
        } else if (memcmp(h, RITE_SECTION_DEBUG_IDENT, 4) == 0 && records && !debug) {
            r.section = "DBG";
            r.next = records;
            ok = debug = debug_section(&r, &s);
        } else if (memcmp(h, RITE_SECTION_LV_IDENT, 4) == 0 && records && !lv) {
            r.section = "LVAR";
            r.next = records;
            ok = lv = lv_section(&r, &s);
        } else {
            return fail(&r, h, "unexpected section %s", name4(h).s);
        }
        if (!ok) {
            return 0;
        }
        r.irep = 0;
        if (s.p != s.end) {
            return fail(&r, s.p, "%lu bytes after the last record", (unsigned long)(s.end - s.p));
        }
        r.section = NULL;
    }
    return fail(&r, NULL, "the file ends without an END section");
}
