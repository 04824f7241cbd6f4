/* guard.c: closes the ways scripts can crash (or hang) mruby 3.1 itself,
 * found by calling the core classes' methods on odd receivers and
 * arguments (docs/reliability.md lists them). Each closed way is a C
 * method wrapped in a check, installed in every new VM: the libmruby linked
 * may be Debian's, unpatched. Needs neither httpd nor anything of the
 * module: a test program can install the same guards in a bare mruby.
 *
 * The objects at fault are made but never initialized: Proc.allocate (a
 * Proc without code: calling it, or a `when` with it, dereferenced NULL),
 * Method.allocate and UnboundMethod.allocate (their C methods read
 * instance variables only initialize sets), a String allocated without
 * its buffer (String.allocate, or #dup, #clone and String.new with
 * #initialize_copy or #initialize redefined: insert, prepend, []=, eval,
 * open, ... wrote through NULL), a Proc duplicated with #initialize_copy
 * redefined. And C methods that trust their arguments: IO#_readchar and
 * IO._bufread (helpers of mruby-io's Ruby, callable by scripts) with an
 * empty or shorter buffer, Addrinfo#unix_path with a @sockaddr that is no
 * String; Array#* of an empty Array by 2**62 and Float#<< by 2**62, C
 * loops that never end (no instruction runs, so mrubyTimeout cannot stop
 * them). */

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/proc.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include <math.h>

#include "guard.h"
#include "mruby_internal.h"

/* The wrapped method's environment, for the checks that need values of
 * their VM (Class#new and #allocate): [0] mruby's own C function, then
 * those values. */
enum { ENV_ORIGINAL, ENV_METHOD, ENV_UNBOUND, ENV_SIZE };

static mrb_func_t original(mrb_state *mrb)
{
    return (mrb_func_t)mrb_cptr(mrb_cfunc_env_get(mrb, ENV_ORIGINAL));
}

/* mruby's own C function of a method, or NULL when c has no such C method
 * (a gem this libmruby was built without). */
static mrb_func_t c_function(mrb_state *mrb, struct RClass *c, const char *name)
{
    struct RClass *owner = c;
    mrb_method_t m;

    if (c == NULL) {
        return NULL;
    }
    m = mrb_method_search_vm(mrb, &owner, mrb_intern_cstr(mrb, name));
    return MRB_METHOD_UNDEF_P(m) || !MRB_METHOD_CFUNC_P(m) ? NULL : MRB_METHOD_CFUNC(m);
}

/* The other checks are plain C methods, which keep mruby's function in a
 * variable of the process: it is the same in every VM (one libmruby), and
 * a class whose methods are all C functions or Ruby holds the same bytes
 * in every VM, so that a child's VMs share its method table (vm.c). Each
 * VM's set-up stores the same value; an atomic store and load make that
 * no data race. */
void mm_guard_wrap(mrb_state *mrb, struct RClass *c, const char *name, mrb_func_t fn, mrb_func_t *original_of)
{
    mrb_func_t own = c_function(mrb, c, name);

    if (own == NULL) {
        return;
    }
    __atomic_store_n(original_of, own, __ATOMIC_RELAXED);
    mrb_define_method(mrb, c, name, fn, MRB_ARGS_ANY());
}

mrb_func_t mm_guard_original(mrb_func_t *original_of)
{
    return __atomic_load_n(original_of, __ATOMIC_RELAXED);
}

/* Replaces Class#name by fn, which calls the C function of Class#from
 * (the original, found with original()) once its check passed; the
 * environment also keeps the VM's Method and UnboundMethod classes
 * (classes[0] and [1], nil without mruby-method). */
static void wrap_class_method(mrb_state *mrb, const char *name, const char *from, mrb_func_t fn,
                              const mrb_value classes[2])
{
    mrb_func_t own = c_function(mrb, mrb->class_class, from);
    mrb_method_t m;
    mrb_value env[ENV_SIZE];

    if (own == NULL) {
        return;
    }
    env[ENV_ORIGINAL] = mrb_cptr_value(mrb, (void *)own);
    env[ENV_METHOD] = classes[0];
    env[ENV_UNBOUND] = classes[1];
    MRB_METHOD_FROM_PROC(m, mrb_proc_new_cfunc_with_env(mrb, fn, ENV_SIZE, env));
    mrb_define_method_raw(mrb, mrb->class_class, mrb_intern_cstr(mrb, name), m);
}

/* mruby's functions of the methods the plain checks replace */
static mrb_func_t own_dup, own_clone, own_array_times, own_float_lshift, own_float_rshift, own_io_readchar,
    own_io_bufread, own_addrinfo_unix_path;
#define OWN(name) mm_guard_original(&own_##name)

static struct RClass *class_or_null(mrb_state *mrb, const char *name)
{
    return mrb_class_defined(mrb, name) ? mrb_class_get(mrb, name) : NULL;
}

/* ------------------------------------------------ allocation */

/* Classes whose objects only their own constructors may make: a Proc
 * (instance type PROC, subclasses included) and, when mruby-method is
 * there, Method and UnboundMethod (kept in the environment). */
static int uninitializable(mrb_state *mrb, struct RClass *c)
{
    mrb_value method = mrb_cfunc_env_get(mrb, ENV_METHOD);
    mrb_value unbound = mrb_cfunc_env_get(mrb, ENV_UNBOUND);

    if (MRB_INSTANCE_TT(c) == MRB_TT_PROC) {
        return 1;
    }
    for (; c; c = c->super) {
        if ((!mrb_nil_p(method) && c == mrb_class_ptr(method)) ||
            (!mrb_nil_p(unbound) && c == mrb_class_ptr(unbound))) {
            return 1;
        }
    }
    return 0;
}

/* A String whose buffer was never set (mruby allocates it zeroed) is
 * made an empty one: everything else about it is the same as a String's
 * made by String.new. */
static void give_buffer(mrb_value obj)
{
    struct RString *s;

    if (!mrb_string_p(obj)) {
        return;
    }
    s = mrb_str_ptr(obj);
    if (!RSTR_EMBED_P(s) && s->as.heap.ptr == NULL) {
        RSTR_SET_EMBED_FLAG(s);
        RSTR_SET_EMBED_LEN(s, 0);
        RSTR_EMBED_PTR(s)[0] = '\0';
    }
}

/* Class#allocate; and the allocation of Class#new, whose environment
 * also keeps mruby's Class#allocate. */
static mrb_value allocate(mrb_state *mrb, mrb_value klass)
{
    mrb_value obj;

    if (uninitializable(mrb, mrb_class_ptr(klass))) {
        mrb_raisef(mrb, E_TYPE_ERROR, "allocator undefined for %v", klass);
    }
    obj = original(mrb)(mrb, klass);
    give_buffer(obj);
    return obj;
}

/* Class#new: mruby's allocates and calls #initialize in one C function;
 * this one allocates through the check above (mruby's Class#allocate reads
 * no argument), so that #initialize (which a script may have redefined to
 * do nothing) meets a valid object. */
static mrb_value new_instance(mrb_state *mrb, mrb_value klass)
{
    const mrb_value *argv;
    mrb_int argc;
    mrb_value blk, obj;

    mrb_get_args(mrb, "*!&", &argv, &argc, &blk);
    obj = allocate(mrb, klass);
    mrb_funcall_with_block(mrb, obj, mrb_intern_lit(mrb, "initialize"), argc, argv, blk);
    return obj;
}

/* Kernel#dup and #clone allocate the copy, then leave the copying of a
 * String's or a Proc's contents to #initialize_copy, which a script may
 * have redefined: the copy of a Proc gets its original's code, a String
 * at least an empty buffer. */
static mrb_value copied(mrb_state *mrb, mrb_value self, mrb_value obj)
{
    give_buffer(obj);
    if (mrb_type(obj) == MRB_TT_PROC && mrb_type(self) == MRB_TT_PROC) {
        struct RProc *p = mrb_proc_ptr(obj);

        if (mm_mi_proc_lacks_code(p)) {
            mrb_proc_copy(mrb, p, mrb_proc_ptr(self));
        }
    }
    return obj;
}

static mrb_value copy_dup(mrb_state *mrb, mrb_value self)
{
    return copied(mrb, self, OWN(dup)(mrb, self));
}

static mrb_value copy_clone(mrb_state *mrb, mrb_value self)
{
    return copied(mrb, self, OWN(clone)(mrb, self));
}

/* ------------------------------------------------ arguments */

/* mruby's Array#* copies the receiver `times` times: an empty Array by
 * 2**62 loops that often, copying nothing. */
static mrb_value array_times(mrb_state *mrb, mrb_value self)
{
    mrb_value arg = mrb_get_arg1(mrb);

    if (RARRAY_LEN(self) == 0 && mrb_integer_p(arg) && mrb_integer(arg) > 0) {
        return mrb_ary_new(mrb);
    }
    return OWN(array_times)(mrb, self);
}

/* Float#<< and #>> double the value once per bit of a left shift, in a C
 * loop: 1.5 << 2**62 never ended. Past MM_FLOAT_SHIFT_MAX doublings any
 * finite value but 0 is infinite, so the result is taken at that width:
 * what mruby's loop ends with (0 as the Integer 0, as mruby answers). */
#define MM_FLOAT_SHIFT_MAX 2100

static mrb_value float_shifted(mrb_state *mrb, mrb_value self, mrb_int left, mrb_func_t own)
{
    mrb_float v;

    if (left <= MM_FLOAT_SHIFT_MAX) {
        return own(mrb, self);
    }
    v = ldexp(mrb_float(self), MM_FLOAT_SHIFT_MAX);
    return v == 0 ? mrb_int_value(mrb, 0) : mrb_float_value(mrb, v);
}

static mrb_value float_lshift(mrb_state *mrb, mrb_value self)
{
    mrb_value width = mrb_get_arg1(mrb);

    return mrb_integer_p(width) && mrb_float_p(self)
               ? float_shifted(mrb, self, mrb_integer(width), OWN(float_lshift))
               : OWN(float_lshift)(mrb, self);
}

static mrb_value float_rshift(mrb_state *mrb, mrb_value self)
{
    mrb_value width = mrb_get_arg1(mrb);

    /* mruby's own takes MRB_INT_MIN as a right shift */
    return mrb_integer_p(width) && mrb_integer(width) != MRB_INT_MIN && mrb_float_p(self)
               ? float_shifted(mrb, self, -mrb_integer(width), OWN(float_rshift))
               : OWN(float_rshift)(mrb, self);
}

/* IO#_readchar(buf): takes the first character off buf, which must hold
 * one. */
static mrb_value io_readchar(mrb_state *mrb, mrb_value self)
{
    mrb_value buf = mrb_get_arg1(mrb);

    if (!mrb_string_p(buf) || RSTRING_LEN(buf) == 0) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "IO#_readchar needs a buffer that is not empty");
    }
    return OWN(io_readchar)(mrb, self);
}

/* IO._bufread(buf, len): takes len bytes off buf, which must hold them. */
static mrb_value io_bufread(mrb_state *mrb, mrb_value self)
{
    mrb_value buf;
    mrb_int len;

    mrb_get_args(mrb, "Si", &buf, &len);
    if (len < 0 || len > RSTRING_LEN(buf)) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "IO._bufread: length outside the buffer");
    }
    return OWN(io_bufread)(mrb, self);
}

/* Addrinfo#unix_path reads @sockaddr as a String, and a script may set it
 * to anything. */
static mrb_value addrinfo_unix_path(mrb_state *mrb, mrb_value self)
{
    if (!mrb_string_p(mrb_iv_get(mrb, self, mrb_intern_lit(mrb, "@sockaddr")))) {
        mrb_raise(mrb, E_TYPE_ERROR, "Addrinfo without a sockaddr String");
    }
    return OWN(addrinfo_unix_path)(mrb, self);
}

void mm_guard_init(mrb_state *mrb)
{
    mrb_value classes[2];
    struct RClass *io = class_or_null(mrb, "IO");
    struct RClass *method = class_or_null(mrb, "Method");
    struct RClass *unbound = class_or_null(mrb, "UnboundMethod");

    classes[0] = method ? mrb_obj_value(method) : mrb_nil_value();
    classes[1] = unbound ? mrb_obj_value(unbound) : mrb_nil_value();
    /* new first: it keeps mruby's allocate, which the next line replaces */
    wrap_class_method(mrb, "new", "allocate", new_instance, classes);
    wrap_class_method(mrb, "allocate", "allocate", allocate, classes);
    mm_guard_wrap(mrb, mrb->kernel_module, "dup", copy_dup, &own_dup);
    mm_guard_wrap(mrb, mrb->kernel_module, "clone", copy_clone, &own_clone);
    mm_guard_wrap(mrb, mrb->array_class, "*", array_times, &own_array_times);
    mm_guard_wrap(mrb, mrb->float_class, "<<", float_lshift, &own_float_lshift);
    mm_guard_wrap(mrb, mrb->float_class, ">>", float_rshift, &own_float_rshift);
    if (io) {
        mm_guard_wrap(mrb, io, "_readchar", io_readchar, &own_io_readchar);
        mm_guard_wrap(mrb, mrb_class_ptr(mrb_singleton_class(mrb, mrb_obj_value(io))), "_bufread", io_bufread,
                      &own_io_bufread);
    }
    mm_guard_wrap(mrb, class_or_null(mrb, "Addrinfo"), "unix_path", addrinfo_unix_path,
                  &own_addrinfo_unix_path);
}
