/* SPDX-License-Identifier: MIT */
/* loom.h - tensors, types, contexts, graphs, ops and status codes.
 *
 * This is the half of the public API that knows nothing about devices:
 * building a compute graph.  Devices, buffers, backends and the plugin
 * registry live in loom-backend.h; the plugin ABI in loom-plugin.h.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the library's exported functions; everything else is hidden. */
#define LOOM_API __attribute__((visibility("default")))

#define LOOM_MAX_DIMS 4
#define LOOM_MAX_SRC 6
#define LOOM_MAX_OP_PARAMS 16 /* 32-bit words */
#define LOOM_MAX_NAME 64

/* ------------------------------------------------------------------------
 * Status codes.  Actions return LOOM_OK (0) or a negative LOOM_E_*.
 * The one list below makes both the enum and loom_strerror().  A new
 * code takes the next negative number; none is ever renumbered.
 */
#define LOOM_STATUS_MAP(X)                                                   \
	X(OK, 0, "success")                                                  \
	X(E_INVAL, -1, "invalid argument")                                   \
	X(E_NOMEM, -2, "out of memory")                                      \
	X(E_NOT_FOUND, -3, "not found")                                      \
	X(E_RANGE, -4, "out of bounds")                                      \
	X(E_ALIGN, -5, "misaligned")                                         \
	X(E_UNSUPPORTED, -6, "not supported")                                \
	X(E_ABI, -7, "ABI mismatch")                                         \
	X(E_PLUGIN, -8, "plugin failed")                                     \
	X(E_DEVICE, -9, "device error")                                      \
	X(E_STATE, -10, "invalid state")                                     \
	X(E_DECLINED, -11, "declined")                                       \
	X(E_NOT_APPLICABLE, -12, "not applicable on this machine")          \
	X(E_IO, -13, "input/output error")                                   \
	X(E_BUSY, -14, "still in use")

enum loom_status {
#define LOOM_X_(name, value, text) LOOM_##name = value,
	LOOM_STATUS_MAP(LOOM_X_)
#undef LOOM_X_
};

/* Returns a static string naming a status code, "unknown status" if none. */
LOOM_API const char *loom_strerror(int status);

/* Returns the message of the last error recorded on this thread by any
 * loom call (never NULL; "" when none).  The string is owned by the library
 * and valid until the next failing call on this thread. */
LOOM_API const char *loom_error_message(void);

/* ------------------------------------------------------------------------
 * Logging.  Default level is warn (LOOM_LOG=warn|info|debug|none), to
 * stderr, unless the application installs its own callback.
 */
enum loom_log_level {
	LOOM_LOG_NONE = 0,
	LOOM_LOG_ERROR,
	LOOM_LOG_WARN,
	LOOM_LOG_INFO,
	LOOM_LOG_DEBUG,
};

typedef void (*loom_log_fn)(enum loom_log_level level, const char *msg,
			    void *userdata);

/* Replaces the log callback; NULL restores the default (stderr). */
LOOM_API void loom_log_set_callback(loom_log_fn fn, void *userdata);
LOOM_API void loom_log_set_level(enum loom_log_level level);
LOOM_API enum loom_log_level loom_log_get_level(void);
/* Logs through the application's callback (as the library and its
 * plugins do), when level is at or above the set level. */
LOOM_API void loom_log(enum loom_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Records an error message for loom_error_message() and returns status:
 * for code built on loom (plugins, model libraries, applications) that
 * reports its own mistakes the way the library does. */
LOOM_API int loom_error_set(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Reads a LOOM_* variable (NULL when unset, and in secure-execution
 * processes, where every LOOM_* variable is ignored). */
LOOM_API const char *loom_env_get(const char *name);

/* ------------------------------------------------------------------------
 * Types.  X(NAME, "name", block size in elements, bytes per block)
 * The numbers are ABI (plugins compare them): a new type is only ever
 * appended, never inserted, and none is renumbered or removed.
 */
#define LOOM_TYPE_MAP(X)                                                     \
	X(F32, "f32", 1, 4)                                                  \
	X(F16, "f16", 1, 2)                                                  \
	X(BF16, "bf16", 1, 2)                                                \
	X(I32, "i32", 1, 4)                                                  \
	X(Q8_0, "q8_0", 32, 34)                                              \
	X(Q4_0, "q4_0", 32, 18)                                              \
	X(Q4_K, "q4_k", 256, 144)                                            \
	X(Q5_K, "q5_k", 256, 176)                                            \
	X(Q6_K, "q6_k", 256, 210)                                            \
	X(Q4_1, "q4_1", 32, 20)                                              \
	X(Q5_0, "q5_0", 32, 22)                                              \
	X(Q5_1, "q5_1", 32, 24)                                              \
	X(Q3_K, "q3_k", 256, 110)                                            \
	X(Q2_K, "q2_k", 256, 84)                                             \
	X(IQ4_NL, "iq4_nl", 32, 18)                                          \
	X(IQ4_XS, "iq4_xs", 256, 136)                                        \
	X(MXFP4, "mxfp4", 32, 17)

enum loom_type {
#define LOOM_X_(name, str, blck, size) LOOM_TYPE_##name,
	LOOM_TYPE_MAP(LOOM_X_)
#undef LOOM_X_
	LOOM_TYPE_COUNT
};

#define LOOM_QK8_0 32

/* A Q8_0 block: 32 values v[i] = d * qs[i], d stored as IEEE half. */
struct loom_block_q8_0 {
	uint16_t d;
	int8_t qs[LOOM_QK8_0];
};

/* The blocks below are byte for byte those of GGUF files; every scale
 * marked half is an IEEE half.  Nothing in them needs alignment beyond 2
 * bytes, and none has padding. */
#define LOOM_QK4_0 32
#define LOOM_QK_K 256

/* A Q4_0 block: 32 values v[i] = d * (q[i] - 8) with 4-bit q[i]; byte
 * qs[j] holds q[j] in its low nibble and q[j + 16] in its high one. */
struct loom_block_q4_0 {
	uint16_t d; /* half */
	uint8_t qs[LOOM_QK4_0 / 2];
};

/* A Q4_K super-block: 256 values in 8 sub-blocks of 32.  Sub-block s has
 * a 6-bit scale sc[s] and a 6-bit min m[s]; its values are
 * d * sc[s] * q - dmin * m[s] with 4-bit q.  scales[12] packs sc and m:
 * for s < 4, sc[s] and m[s] are the low 6 bits of scales[s] and
 * scales[s + 4]; for s >= 4, their low 4 bits are the low and high
 * nibble of scales[s + 4] and their top 2 bits the top 2 bits of
 * scales[s - 4] (sc) and scales[s] (m).  Byte qs[32 c + l] holds q of
 * value 64 c + l in its low nibble and of value 64 c + 32 + l in its
 * high one. */
struct loom_block_q4_k {
	uint16_t d;    /* half: the scales' scale */
	uint16_t dmin; /* half: the mins' scale */
	uint8_t scales[12];
	uint8_t qs[LOOM_QK_K / 2];
};

/* A Q5_K super-block: as Q4_K with 5-bit q; the fifth bit of value
 * 64 c + l is bit 2 c of qh[l], of value 64 c + 32 + l bit 2 c + 1. */
struct loom_block_q5_k {
	uint16_t d;    /* half */
	uint16_t dmin; /* half */
	uint8_t scales[12];
	uint8_t qh[LOOM_QK_K / 8];
	uint8_t qs[LOOM_QK_K / 2];
};

/* A Q6_K super-block: 256 values in 16 sub-blocks of 16, value i being
 * d * scales[i / 16] * (q - 32) with 6-bit q.  In half h (values
 * 128 h .. 128 h + 127), value 128 h + 32 g + l (g < 4, l < 32) has its
 * low 4 bits in ql[64 h + 32 (g & 1) + l] (low nibble for g < 2, high
 * for g >= 2) and its top 2 bits in bits 2 g, 2 g + 1 of qh[32 h + l]. */
struct loom_block_q6_k {
	uint8_t ql[LOOM_QK_K / 2];
	uint8_t qh[LOOM_QK_K / 4];
	int8_t scales[LOOM_QK_K / 16];
	uint16_t d; /* half */
};

/* A Q4_1 block: 32 values v[i] = d * q[i] + m with 4-bit q[i], nibbles
 * as in Q4_0. */
struct loom_block_q4_1 {
	uint16_t d; /* half */
	uint16_t m; /* half */
	uint8_t qs[LOOM_QK4_0 / 2];
};

/* A Q5_0 block: 32 values v[i] = d * (q[i] - 16) with 5-bit q[i]: the low
 * 4 bits as Q4_0's nibbles, the fifth bit of q[i] bit i of qh (read as a
 * little-endian 32-bit word). */
struct loom_block_q5_0 {
	uint16_t d; /* half */
	uint8_t qh[4];
	uint8_t qs[LOOM_QK4_0 / 2];
};

/* A Q5_1 block: 32 values v[i] = d * q[i] + m, q[i] as in Q5_0. */
struct loom_block_q5_1 {
	uint16_t d; /* half */
	uint16_t m; /* half */
	uint8_t qh[4];
	uint8_t qs[LOOM_QK4_0 / 2];
};

/* A Q3_K super-block: 256 values in 16 sub-blocks of 16, value i being
 * d * (sc[i / 16] - 32) * (q - 4) with 3-bit q.  Value i = 128 h + 32 g +
 * l (g < 4, l < 32) has its low 2 bits in bits 2 g, 2 g + 1 of
 * qs[32 h + l] and its third in bit 4 h + g of hmask[l].  The 6-bit
 * sc[s] take their low 4 bits from the low (s < 8) or high (s >= 8)
 * nibble of scales[s % 8], their top 2 from bits 2 (s / 4), 2 (s / 4) + 1
 * of scales[8 + s % 4]. */
struct loom_block_q3_k {
	uint8_t hmask[LOOM_QK_K / 8];
	uint8_t qs[LOOM_QK_K / 4];
	uint8_t scales[12];
	uint16_t d; /* half */
};

/* A Q2_K super-block: 256 values in 16 sub-blocks of 16, value i being
 * d * (scales[i / 16] & 15) * q - dmin * (scales[i / 16] >> 4) with 2-bit
 * q laid out as Q3_K's low 2 bits. */
struct loom_block_q2_k {
	uint8_t scales[LOOM_QK_K / 16];
	uint8_t qs[LOOM_QK_K / 4];
	uint16_t d;    /* half */
	uint16_t dmin; /* half */
};

/* An IQ4_NL block: 32 values v[i] = d * LOOM_IQ4NL_VALUES[q[i]] with
 * 4-bit q[i], nibbles as in Q4_0. */
struct loom_block_iq4_nl {
	uint16_t d; /* half */
	uint8_t qs[LOOM_QK4_0 / 2];
};

/* An IQ4_XS super-block: 256 values in 8 sub-blocks of 32, sub-block s
 * being IQ4_NL's with step d * (ls[s] - 32); the 6-bit ls[s] takes its
 * low 4 bits from nibble s % 2 of scales_l[s / 2], its top 2 from bits
 * 2 s, 2 s + 1 of scales_h.  qs[16 s .. 16 s + 15] are sub-block s's
 * nibbles, as Q4_0's. */
struct loom_block_iq4_xs {
	uint16_t d; /* half */
	uint16_t scales_h;
	uint8_t scales_l[LOOM_QK_K / 64];
	uint8_t qs[LOOM_QK_K / 2];
};

/* An MXFP4 block (OCP microscaling): 32 values v[i] = 2^(e - 128) *
 * LOOM_MXFP4_VALUES[q[i]], q[i] 4-bit E2M1 codes (doubled, so that they
 * are integers), nibbles as in Q4_0. */
struct loom_block_mxfp4 {
	uint8_t e;
	uint8_t qs[LOOM_QK4_0 / 2];
};

/* The 16 values of IQ4_NL's and IQ4_XS's codes, and MXFP4's (doubled). */
#define LOOM_IQ4NL_VALUES                                                   \
	{ -127, -104, -83, -65, -49, -35, -22, -10,                         \
	  1, 13, 25, 38, 53, 69, 89, 113 }
#define LOOM_MXFP4_VALUES                                                   \
	{ 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 }

LOOM_API const char *loom_type_name(enum loom_type type);
/* Looks a type up by name ("f32", "q8_0"); returns LOOM_E_NOT_FOUND. */
LOOM_API int loom_type_from_name(const char *name, enum loom_type *out);
LOOM_API int64_t loom_type_block_size(enum loom_type type);
LOOM_API size_t loom_type_size(enum loom_type type); /* bytes per block */
LOOM_API bool loom_type_is_quantized(enum loom_type type);
/* Bytes of a row of ne0 elements; ne0 must be a multiple of the block. */
LOOM_API size_t loom_type_row_size(enum loom_type type, int64_t ne0);

LOOM_API uint16_t loom_f32_to_f16(float f);
LOOM_API float loom_f16_to_f32(uint16_t h);
LOOM_API uint16_t loom_f32_to_bf16(float f); /* round to nearest even */
LOOM_API float loom_bf16_to_f32(uint16_t h);
/* Converts n values (n a multiple of the block sizes of both types) from
 * one type to another.  F32, F16, BF16 and the quantized types convert
 * among themselves (to a quantized type by quantizing); I32 only to I32.
 * Returns LOOM_E_UNSUPPORTED otherwise. */
LOOM_API int loom_type_convert(enum loom_type src_type, const void *src,
			  enum loom_type dst_type, void *dst, int64_t n);

/* ------------------------------------------------------------------------
 * Ops.  X(NAME, "name")
 * As with types and status codes, the numbers are ABI: a new op is only
 * ever appended at the end of the list.
 */
#define LOOM_OP_MAP(X)                                                       \
	X(NONE, "none")                                                      \
	X(ADD, "add")                                                        \
	X(SUB, "sub")                                                        \
	X(MUL, "mul")                                                        \
	X(DIV, "div")                                                        \
	X(SCALE, "scale")                                                    \
	X(SILU, "silu")                                                      \
	X(GELU, "gelu")                                                      \
	X(RMS_NORM, "rms_norm")                                              \
	X(NORM, "norm")                                                      \
	X(SOFT_MAX, "soft_max")                                              \
	X(ROPE, "rope")                                                      \
	X(MUL_MAT, "mul_mat")                                                \
	X(MUL_MAT_ID, "mul_mat_id")                                          \
	X(GET_ROWS, "get_rows")                                              \
	X(SET_ROWS, "set_rows")                                              \
	X(COPY, "copy")                                                      \
	X(CONT, "cont")                                                      \
	X(CONCAT, "concat")                                                  \
	X(SUM_ROWS, "sum_rows")                                              \
	X(ARGMAX, "argmax")                                                  \
	X(TOP_K, "top_k")                                                    \
	X(VIEW, "view")                                                      \
	X(RESHAPE, "reshape")                                                \
	X(PERMUTE, "permute")                                                \
	X(TRANSPOSE, "transpose")                                            \
	X(SOFT_MAX_SINKS, "soft_max_sinks")                                  \
	X(ROPE_YARN, "rope_yarn")                                            \
	X(SWIGLU_OAI, "swiglu_oai")                                          \
	X(ADD_ID, "add_id")

enum loom_op {
#define LOOM_X_(name, str) LOOM_OP_##name,
	LOOM_OP_MAP(LOOM_X_)
#undef LOOM_X_
	LOOM_OP_COUNT
};

LOOM_API const char *loom_op_name(enum loom_op op);
/* True for ops that only reinterpret their source (no kernel runs). */
LOOM_API bool loom_op_is_view(enum loom_op op);

/* What the core's table of ops says of an op besides its shape rule
 * (loom_op_flags; 0 for an invalid op).  The LINEAR and ADDITIVE flags
 * say which sums pass through the op: a device that holds summands of a
 * value (the meta device's PARTIAL state) may apply such an op to each
 * summand and sum afterwards. */
enum {
	LOOM_OPF_NO_KERNEL = 1u << 0, /* nothing runs: a leaf or a view */
	LOOM_OPF_VIEW = 1u << 1,      /* shows a source's bytes anew */
	LOOM_OPF_IN_PLACE = 1u << 2,  /* writes a source; the result views it */
	LOOM_OPF_ADDITIVE = 1u << 3,  /* op(a1+a2, b1+b2) = op(a1,b1)+op(a2,b2) */
	LOOM_OPF_LINEAR0 = 1u << 4,   /* op(a1+a2, b) = op(a1,b) + op(a2,b) */
	LOOM_OPF_LINEAR1 = 1u << 5,   /* op(a, b1+b2) = op(a,b1) + op(a,b2) */
};

LOOM_API uint32_t loom_op_flags(enum loom_op op);
/* The most sources the op reads (some may be optional: soft_max's mask). */
LOOM_API int loom_op_n_src(enum loom_op op);
/* The source whose bytes the result is: the one a view shows or an
 * in-place op writes; -1 for other ops. */
LOOM_API int loom_op_target_src(enum loom_op op);

/* Tensor flags. */
enum {
	LOOM_TENSOR_INPUT = 1u << 0,  /* set by the application before compute */
	LOOM_TENSOR_OUTPUT = 1u << 1, /* read after compute; never reused */
	LOOM_TENSOR_WEIGHT = 1u << 2, /* a parameter (weights, caches) */
};

/* A tensor descriptor.  Dimension 0 is the innermost; nb[] are byte
 * strides (nb[0] is the size of one block).  The descriptor lives in the
 * context that made it; its data lives in a buffer (see loom-backend.h).
 *
 * The layout is ABI: every plugin reads these fields.  Only the core
 * makes descriptors (loom_tensor_new and the op constructors), zeroed.
 * Fields never move; a new field takes the place of the first words of
 * reserved[], so the size and every offset stay what they are, and a
 * plugin built before the field existed reads it as zero.  Plugins must
 * not write reserved[] nor rely on sizeof(struct loom_tensor).
 *
 * Op parameters, in op_params (32-bit words, floats stored bitwise):
 *   SCALE     [0] f32 scale
 *   RMS_NORM  [0] f32 eps          NORM [0] f32 eps
 *   SOFT_MAX  [0] f32 scale        src[1]: optional mask
 *   ROPE      [0] i32 n_dims [1] i32 mode [2] f32 freq_base
 *             [3] f32 freq_scale   src[1]: positions
 *   CONCAT    [0] i32 dim          TOP_K [0] i32 k
 *   PERMUTE   [0..3] i32 axes
 *   MUL_MAT_ID src[0] experts, src[1] input, src[2] ids
 *   SET_ROWS  src[0] destination, src[1] values, src[2] row ids
 *   CPY       src[0] source, src[1] destination
 *   SOFT_MAX_SINKS [0] f32 scale   src[1]: optional mask, src[2]: sinks
 *   ROPE_YARN [0..3] as ROPE [4] i32 n_ctx_orig [5] f32 ext_factor
 *             [6] f32 attn_factor [7] f32 beta_fast [8] f32 beta_slow
 *   SWIGLU_OAI [0] f32 alpha [1] f32 limit   src[0] gate, src[1] up
 *   ADD_ID    src[0] a, src[1] biases, src[2] ids
 */
struct loom_tensor {
	enum loom_type type;
	enum loom_op op;
	uint32_t flags;
	int64_t ne[LOOM_MAX_DIMS];
	size_t nb[LOOM_MAX_DIMS];
	int32_t op_params[LOOM_MAX_OP_PARAMS];
	struct loom_tensor *src[LOOM_MAX_SRC];

	struct loom_tensor *view_src; /* the tensor whose data this views */
	size_t view_offs;             /* byte offset into view_src's data */

	void *data;                   /* address inside buffer, or NULL */
	struct loom_buffer *buffer;   /* owning buffer, or NULL */
	/* The state a plugin keeps for this tensor (its buffer's, or the
	 * backend's that computed it): a handle into storage the core owns
	 * (loom_state_t, see loom-plugin.h); 0 when none. */
	uint64_t state;

	char name[LOOM_MAX_NAME];

	uint64_t reserved[8];         /* zero: room for fields to come */
};

LOOM_API int64_t loom_tensor_n_elements(const struct loom_tensor *t);
LOOM_API int64_t loom_tensor_n_rows(const struct loom_tensor *t); /* ne1*ne2*ne3 */
/* Bytes spanned by the tensor's data, strides included. */
LOOM_API size_t loom_tensor_n_bytes(const struct loom_tensor *t);
LOOM_API bool loom_tensor_is_contiguous(const struct loom_tensor *t);
LOOM_API bool loom_tensor_same_shape(const struct loom_tensor *a,
				  const struct loom_tensor *b);
/* True when b can be broadcast to a (every a->ne[i] a multiple of b->ne[i]). */
LOOM_API bool loom_tensor_can_repeat(const struct loom_tensor *b,
			      const struct loom_tensor *a);
LOOM_API int loom_tensor_n_dims(const struct loom_tensor *t);

LOOM_API void loom_tensor_set_name(struct loom_tensor *t, const char *name);
LOOM_API struct loom_tensor *loom_tensor_set_name_fmt(struct loom_tensor *t,
					       const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
LOOM_API void loom_tensor_set_flags(struct loom_tensor *t, uint32_t flags);

LOOM_API float loom_tensor_op_param_f32(const struct loom_tensor *t, int i);
LOOM_API int32_t loom_tensor_op_param_i32(const struct loom_tensor *t, int i);

/* ------------------------------------------------------------------------
 * Contexts: arenas of tensor descriptors (no tensor data).
 */
typedef struct loom_ctx loom_ctx_t;

/* Creates a context that holds up to max_tensors descriptors (0: grows as
 * needed).  Free with loom_ctx_free(), which frees every descriptor and
 * graph made in it. */
LOOM_API int loom_ctx_new(size_t max_tensors, loom_ctx_t **out);
LOOM_API void loom_ctx_free(loom_ctx_t *ctx);
/* The message of the last error recorded on ctx, "" when none.  Owned by
 * ctx. */
LOOM_API const char *loom_ctx_error(const loom_ctx_t *ctx);
LOOM_API void loom_ctx_clear_error(loom_ctx_t *ctx);
/* Iterates the tensors of ctx in creation order: first, then next. */
LOOM_API struct loom_tensor *loom_ctx_first_tensor(loom_ctx_t *ctx);
LOOM_API struct loom_tensor *loom_ctx_next_tensor(loom_ctx_t *ctx,
						  struct loom_tensor *t);
LOOM_API struct loom_tensor *loom_ctx_get_tensor(loom_ctx_t *ctx,
						 const char *name);
LOOM_API size_t loom_ctx_n_tensors(const loom_ctx_t *ctx);

/* New tensors without data.  Dimensions past n_dims are 1.  Invalid
 * arguments return NULL and record a message on ctx (and on the thread). */
LOOM_API struct loom_tensor *loom_tensor_new(loom_ctx_t *ctx,
					     enum loom_type type, int n_dims,
					     const int64_t *ne);
LOOM_API struct loom_tensor *loom_tensor_new_1d(loom_ctx_t *ctx,
						enum loom_type type,
						int64_t ne0);
LOOM_API struct loom_tensor *loom_tensor_new_2d(loom_ctx_t *ctx,
						enum loom_type type,
						int64_t ne0, int64_t ne1);
LOOM_API struct loom_tensor *loom_tensor_new_3d(loom_ctx_t *ctx,
						enum loom_type type,
						int64_t ne0, int64_t ne1,
						int64_t ne2);
LOOM_API struct loom_tensor *loom_tensor_new_4d(loom_ctx_t *ctx,
						enum loom_type type,
						int64_t ne0, int64_t ne1,
						int64_t ne2, int64_t ne3);
/* A new tensor of the same type and shape as t (contiguous). */
LOOM_API struct loom_tensor *loom_tensor_dup(loom_ctx_t *ctx,
					     const struct loom_tensor *t);

/* ------------------------------------------------------------------------
 * Op constructors.  Each validates shapes and types; on a mistake it
 * returns NULL and records a message on ctx.  A NULL source is itself an
 * error (so a chain of calls fails at its first mistake, with its message).
 *
 * Elementwise and row ops read F32, F16 or BF16 and produce F32.
 */

/* a op b, with b broadcast to a's shape (loom_tensor_can_repeat(b, a)). */
LOOM_API struct loom_tensor *loom_add(loom_ctx_t *ctx, struct loom_tensor *a,
				      struct loom_tensor *b);
LOOM_API struct loom_tensor *loom_sub(loom_ctx_t *ctx, struct loom_tensor *a,
				      struct loom_tensor *b);
LOOM_API struct loom_tensor *loom_mul(loom_ctx_t *ctx, struct loom_tensor *a,
				      struct loom_tensor *b);
LOOM_API struct loom_tensor *loom_div(loom_ctx_t *ctx, struct loom_tensor *a,
				      struct loom_tensor *b);
LOOM_API struct loom_tensor *loom_scale(loom_ctx_t *ctx,
					struct loom_tensor *a, float s);
/* x * sigmoid(x). */
LOOM_API struct loom_tensor *loom_silu(loom_ctx_t *ctx, struct loom_tensor *a);
/* The tanh approximation:
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
LOOM_API struct loom_tensor *loom_gelu(loom_ctx_t *ctx, struct loom_tensor *a);
/* Over dimension 0: x / sqrt(mean(x^2) + eps). */
LOOM_API struct loom_tensor *loom_rms_norm(loom_ctx_t *ctx,
					   struct loom_tensor *a, float eps);
/* Over dimension 0: (x - mean) / sqrt(var + eps). */
LOOM_API struct loom_tensor *loom_norm(loom_ctx_t *ctx, struct loom_tensor *a,
				       float eps);
/* Over dimension 0: softmax(a * scale + mask).  mask may be NULL; else it
 * is F32 or F16 with ne0 == a->ne0, ne1 >= a->ne1, broadcast over
 * dimensions 2 and 3 (rows of -INFINITY mask out). */
LOOM_API struct loom_tensor *loom_soft_max(loom_ctx_t *ctx,
					   struct loom_tensor *a,
					   struct loom_tensor *mask,
					   float scale);

/* loom_soft_max with a learned logit per head that takes part in the
 * denominator only ("attention sinks"): with a of [n_kv, n_q, n_head,
 * n_seq] and sinks F32 [n_head], row (q, h) gives
 * e^(x_i - m) / (sum_j e^(x_j - m) + e^(sinks[h] - m)), x = a * scale +
 * mask and m the largest of the x and sinks[h].  mask is as for
 * loom_soft_max and may be NULL. */
LOOM_API struct loom_tensor *loom_soft_max_sinks(loom_ctx_t *ctx,
						 struct loom_tensor *a,
						 struct loom_tensor *mask,
						 struct loom_tensor *sinks,
						 float scale);

enum loom_rope_mode {
	LOOM_ROPE_NORMAL = 0, /* rotates pairs (x[2i], x[2i+1]) */
	LOOM_ROPE_NEOX = 2,   /* rotates pairs (x[i], x[i + n_dims/2]) */
};

/* Rotary position embedding.  a is [head_dim, n_head, n_tokens, 1]; pos
 * is I32 [n_tokens].  The first n_dims (even, <= head_dim) values of each
 * head rotate by pos * freq_scale * freq_base^(-2i/n_dims); the rest pass. */
LOOM_API struct loom_tensor *loom_rope(loom_ctx_t *ctx, struct loom_tensor *a,
				       struct loom_tensor *pos, int n_dims,
				       enum loom_rope_mode mode,
				       float freq_base, float freq_scale);
/* loom_rope with YaRN's context extension.  Pair i's angle is pos *
 * freq_base^(-2i/n_dims) (theta_e), mixed with its interpolation
 * freq_scale * theta_e by ext_factor times a ramp that is 1 for pairs
 * below the correction range and 0 above it, the range running from the
 * pair that turns beta_fast times over n_ctx_orig positions (floored) to
 * the one that turns beta_slow times (ceiled), clamped to [0, n_dims - 1].
 * Cosine and sine are scaled by attn_factor, and by 1 + 0.1 ln(1 /
 * freq_scale) more where ext_factor is not 0.  ext_factor 0 and
 * attn_factor 1 give loom_rope. */
LOOM_API struct loom_tensor *loom_rope_yarn(loom_ctx_t *ctx,
					    struct loom_tensor *a,
					    struct loom_tensor *pos,
					    int n_dims,
					    enum loom_rope_mode mode,
					    float freq_base, float freq_scale,
					    int n_ctx_orig, float ext_factor,
					    float attn_factor,
					    float beta_fast, float beta_slow);
/* The gated unit of the gpt-oss feed-forward: with g = min(gate, limit)
 * and u = clamp(up, -limit, limit), g * sigmoid(alpha * g) * (u + 1).
 * gate and up have one shape; limit > 0 (infinity: no clamp). */
LOOM_API struct loom_tensor *loom_swiglu_oai(loom_ctx_t *ctx,
					     struct loom_tensor *gate,
					     struct loom_tensor *up,
					     float alpha, float limit);

/* a is [K, M, A2, A3] (F32, F16, BF16 or a quantized type), b is
 * [K, N, B2, B3] (F32, F16, BF16) with B2 a multiple of A2 and B3 of A3 (a is broadcast).  The
 * result is F32 [M, N, B2, B3]: each element the dot product of a row of a
 * and a row of b.  Batch (i2, i3) of b uses batch (i2 / (B2/A2),
 * i3 / (B3/A3)) of a, so consecutive batches share one (as GQA needs). */
LOOM_API struct loom_tensor *loom_mul_mat(loom_ctx_t *ctx,
					  struct loom_tensor *a,
					  struct loom_tensor *b);
/* Expert-indexed mul_mat.  as is [K, M, n_expert]; b is [K, B1, n_tokens]
 * with B1 either 1 or n_used; ids is I32 [n_used, n_tokens], values in
 * [0, n_expert).  The result is F32 [M, n_used, n_tokens]: for each token t
 * and slot e, as[:, :, ids[e, t]] times b[:, e % B1, t].  A slot whose id
 * is out of range gets zeros in its result row [:, e, t]. */
LOOM_API struct loom_tensor *loom_mul_mat_id(loom_ctx_t *ctx,
					     struct loom_tensor *as,
					     struct loom_tensor *b,
					     struct loom_tensor *ids);
/* The bias of each token's chosen experts: a is [n, n_used, n_tokens],
 * biases [n, n_expert] and ids I32 [n_used, n_tokens], as for
 * loom_mul_mat_id.  The result is F32, a[:, e, t] + biases[:, ids[e, t]];
 * a slot whose id is out of range adds nothing. */
LOOM_API struct loom_tensor *loom_add_id(loom_ctx_t *ctx,
					 struct loom_tensor *a,
					 struct loom_tensor *biases,
					 struct loom_tensor *ids);
/* a is [ne0, rows, ne2, ne3] of any type; ids is I32 [n, ne2, ne3] (ne2,
 * ne3 may be 1 for a 2D a).  The result is F32 [ne0, n, ne2, ne3] holding
 * the selected rows. */
LOOM_API struct loom_tensor *loom_get_rows(loom_ctx_t *ctx,
					   struct loom_tensor *a,
					   struct loom_tensor *ids);
/* Writes rows of values (F32 [ne0, n, ne2, ne3]) into dst at the row
 * indices ids (I32 [n, ne2, ne3]), converting to dst's type.  The result
 * is a view of dst; compute it to perform the write. */
LOOM_API struct loom_tensor *loom_set_rows(loom_ctx_t *ctx,
					   struct loom_tensor *dst,
					   struct loom_tensor *values,
					   struct loom_tensor *ids);
/* Copies a into b (same number of elements), converting type and layout.
 * a and b must not share bytes (as for loom_tensor_copy), unless they are
 * the very same.  The result is a view of b. */
LOOM_API struct loom_tensor *loom_copy(loom_ctx_t *ctx, struct loom_tensor *a,
				      struct loom_tensor *b);
/* A contiguous copy of a (same type). */
LOOM_API struct loom_tensor *loom_cont(loom_ctx_t *ctx, struct loom_tensor *a);
/* a and b of one type, equal in every dimension but dim. */
LOOM_API struct loom_tensor *loom_concat(loom_ctx_t *ctx,
					 struct loom_tensor *a,
					 struct loom_tensor *b, int dim);
/* F32 [1, ne1, ne2, ne3]: the sum of each row. */
LOOM_API struct loom_tensor *loom_sum_rows(loom_ctx_t *ctx,
					   struct loom_tensor *a);
/* I32 [ne1]: the index of each row's largest value (2D a; first on ties).
 * Here and in loom_top_k, NaN ranks below every number. */
LOOM_API struct loom_tensor *loom_argmax(loom_ctx_t *ctx,
					 struct loom_tensor *a);
/* I32 [k, ne1, ne2, ne3]: indices of each row's k largest values, largest
 * first (lower index first on ties). */
LOOM_API struct loom_tensor *loom_top_k(loom_ctx_t *ctx, struct loom_tensor *a,
					int k);
/* The node op makes of srcs (LOOM_MAX_SRC entries, unused ones NULL) and
 * params (LOOM_MAX_OP_PARAMS words, or NULL for zeros), checked as op's
 * own constructor checks it: for code that rebuilds another graph's nodes
 * without a constructor per op.  View ops, whose result needs sizes and
 * strides, have their own constructors and are refused here. */
LOOM_API struct loom_tensor *loom_op_new(loom_ctx_t *ctx, enum loom_op op,
					 struct loom_tensor *const *srcs,
					 const int32_t *params);

/* Views: no data moves.  Offsets are in bytes; strides nb1.. in bytes;
 * both must be multiples of the type's element size (its block size in
 * bytes for quantized types), and the view must lie inside a's owner. */
LOOM_API struct loom_tensor *loom_view_1d(loom_ctx_t *ctx,
					  struct loom_tensor *a, int64_t ne0,
					  size_t offset);
LOOM_API struct loom_tensor *loom_view_2d(loom_ctx_t *ctx,
					  struct loom_tensor *a, int64_t ne0,
					  int64_t ne1, size_t nb1,
					  size_t offset);
LOOM_API struct loom_tensor *loom_view_3d(loom_ctx_t *ctx,
					  struct loom_tensor *a, int64_t ne0,
					  int64_t ne1, int64_t ne2, size_t nb1,
					  size_t nb2, size_t offset);
LOOM_API struct loom_tensor *loom_view_4d(loom_ctx_t *ctx,
					  struct loom_tensor *a, int64_t ne0,
					  int64_t ne1, int64_t ne2, int64_t ne3,
					  size_t nb1, size_t nb2, size_t nb3,
					  size_t offset);
/* a must be contiguous; the element count must not change. */
LOOM_API struct loom_tensor *loom_reshape_1d(loom_ctx_t *ctx,
					     struct loom_tensor *a,
					     int64_t ne0);
LOOM_API struct loom_tensor *loom_reshape_2d(loom_ctx_t *ctx,
					     struct loom_tensor *a,
					     int64_t ne0, int64_t ne1);
LOOM_API struct loom_tensor *loom_reshape_3d(loom_ctx_t *ctx,
					     struct loom_tensor *a,
					     int64_t ne0, int64_t ne1,
					     int64_t ne2);
LOOM_API struct loom_tensor *loom_reshape_4d(loom_ctx_t *ctx,
					     struct loom_tensor *a,
					     int64_t ne0, int64_t ne1,
					     int64_t ne2, int64_t ne3);
/* Dimension i of a becomes dimension axis_i of the result. */
LOOM_API struct loom_tensor *loom_permute(loom_ctx_t *ctx,
					  struct loom_tensor *a, int axis0,
					  int axis1, int axis2, int axis3);
/* Swaps dimensions 0 and 1. */
LOOM_API struct loom_tensor *loom_transpose(loom_ctx_t *ctx,
					    struct loom_tensor *a);

/* ------------------------------------------------------------------------
 * Graphs: the nodes (tensors with an op) needed for some outputs, in an
 * order where every node comes after its sources.
 */
typedef struct loom_graph loom_graph_t;

/* Creates an empty graph in ctx (freed with ctx). */
LOOM_API int loom_graph_new(loom_ctx_t *ctx, loom_graph_t **out);
/* Adds t and every node it depends on that is not yet in the graph. */
LOOM_API int loom_graph_expand(loom_graph_t *g, struct loom_tensor *t);
LOOM_API size_t loom_graph_n_nodes(const loom_graph_t *g);
LOOM_API struct loom_tensor *loom_graph_node(const loom_graph_t *g, size_t i);
/* Leaves: tensors the graph reads that no node of it computes. */
LOOM_API size_t loom_graph_n_leaves(const loom_graph_t *g);
LOOM_API struct loom_tensor *loom_graph_leaf(const loom_graph_t *g,
					      size_t i);
/* A counter bumped by every change to g, for caches keyed on a graph. */
LOOM_API uint64_t loom_graph_version(const loom_graph_t *g);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_H */
