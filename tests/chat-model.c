/* SPDX-License-Identifier: MIT */
/* chat-model.c - writes the model tests/test-run-chat.sh talks to: a
 * one-layer llama whose attention and FFN add nothing, so that the next
 * token is a function of the last one alone, wired as a few chains:
 *   "\n" -> P a r i s <|im_end|>, then <|im_end|> -> ! -> ! ...
 *   X -> O K <|eot_id|>          Y -> N </s>
 *   Z -> W "\n \n" -> V -> V ...  (a paragraph, then more)
 * (every other token leads to <unk>).  Its vocabulary is SentencePiece
 * style: <unk> <s> </s>, the byte tokens, then <|im_start|>, <|im_end|>,
 * <|eot_id|> (the file's EOT) and a piece "\n \n" (which no prompt's
 * text holds); its chat template is a ChatML one unless the second
 * argument gives another text.
 *
 *   chat-model OUT.gguf [TEMPLATE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/gguf.h"

#define N_EMBD 32
#define N_FF 32
#define N_BYTES 256
#define IM_START (3 + N_BYTES)
#define IM_END (IM_START + 1)
#define EOT (IM_START + 2)
#define NL2 (IM_START + 3)
#define N_VOCAB (IM_START + 4)
#define B(c) (3 + (unsigned char)(c))

static const char chatml[] =
	"{% for message in messages %}{{'<|im_start|>' + message['role'] + "
	"'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
	"{% endif %}";

/* The token after each of these. */
static const int edges[][2] = {
	{ B('\n'), B('P') }, { B('P'), B('a') }, { B('a'), B('r') },
	{ B('r'), B('i') }, { B('i'), B('s') }, { B('s'), IM_END },
	{ IM_END, B('!') }, { B('!'), B('!') },
	{ B('X'), B('O') }, { B('O'), B('K') }, { B('K'), EOT },
	{ B('Y'), B('N') }, { B('N'), 2 },
	{ B('Z'), B('W') }, { B('W'), NL2 }, { NL2, B('V') }, { B('V'), B('V') },
};

#define N_EDGES (int)(sizeof(edges) / sizeof(edges[0]))

static int add(struct gguf_writer *w, const char *name, int64_t ne0,
	       int64_t ne1, const float *data)
{
	int64_t ne[2] = { ne0, ne1 };

	return gguf_writer_add_tensor(w, name, (uint32_t)gguf_tensor_type_of(LOOM_TYPE_F32),
				      ne1 > 1 ? 2 : 1, ne, data);
}

int main(int argc, char **argv)
{
	static float embd[N_VOCAB][N_EMBD], out[N_VOCAB][N_EMBD];
	static float zero[N_EMBD * N_EMBD], one[N_EMBD];
	char *tok[N_VOCAB];
	float score[N_VOCAB];
	int32_t type[N_VOCAB];
	struct gguf_writer *w;
	int ret;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: chat-model OUT.gguf [TEMPLATE]\n");
		return 2;
	}
	/* Each token with a successor is a direction of its own; the
	 * successor's output row points there. */
	for (int e = 0; e < N_EDGES; e++) {
		embd[edges[e][0]][e] = 1;
		out[edges[e][1]][e] = 10;
	}
	for (int i = 0; i < N_EMBD; i++)
		one[i] = 1;
	for (int i = 0; i < N_VOCAB; i++) {
		char buf[16];

		if (i < 3)
			snprintf(buf, sizeof(buf), "%s",
				 i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
		else if (i < IM_START)
			snprintf(buf, sizeof(buf), "<0x%02X>", i - 3);
		else
			snprintf(buf, sizeof(buf), "%s",
				 i == IM_START ? "<|im_start|>" :
				 i == IM_END ? "<|im_end|>" :
				 i == EOT ? "<|eot_id|>" : "\n\xe2\x96\x81\n");
		tok[i] = strdup(buf);
		score[i] = 0;
		type[i] = i == 0 ? 2 : i == NL2 ? 1 :
			  i < 3 || i >= IM_START ? 3 : 6;
	}
	if (gguf_writer_new(&w))
		return 1;
	gguf_writer_add_str(w, "general.architecture", "llama");
	gguf_writer_add_u32(w, "llama.context_length", 1 << 17);
	gguf_writer_add_u32(w, "llama.embedding_length", N_EMBD);
	gguf_writer_add_u32(w, "llama.block_count", 1);
	gguf_writer_add_u32(w, "llama.feed_forward_length", N_FF);
	gguf_writer_add_u32(w, "llama.attention.head_count", 1);
	gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon",
			    1e-5f);
	gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
	gguf_writer_add_array(w, "tokenizer.ggml.tokens", GGUF_TYPE_STRING,
			      N_VOCAB, tok);
	gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32,
			      N_VOCAB, score);
	gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32,
			      N_VOCAB, type);
	gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
	gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
	gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", EOT);
	gguf_writer_add_str(w, "tokenizer.chat_template",
			    argc > 2 ? argv[2] : chatml);
	ret = add(w, "token_embd.weight", N_EMBD, N_VOCAB, &embd[0][0]) ||
	      add(w, "output_norm.weight", N_EMBD, 1, one) ||
	      add(w, "output.weight", N_EMBD, N_VOCAB, &out[0][0]) ||
	      add(w, "blk.0.attn_norm.weight", N_EMBD, 1, one) ||
	      add(w, "blk.0.attn_q.weight", N_EMBD, N_EMBD, zero) ||
	      add(w, "blk.0.attn_k.weight", N_EMBD, N_EMBD, zero) ||
	      add(w, "blk.0.attn_v.weight", N_EMBD, N_EMBD, zero) ||
	      add(w, "blk.0.attn_output.weight", N_EMBD, N_EMBD, zero) ||
	      add(w, "blk.0.ffn_norm.weight", N_EMBD, 1, one) ||
	      add(w, "blk.0.ffn_gate.weight", N_EMBD, N_FF, zero) ||
	      add(w, "blk.0.ffn_up.weight", N_EMBD, N_FF, zero) ||
	      add(w, "blk.0.ffn_down.weight", N_FF, N_EMBD, zero) ||
	      gguf_writer_save(w, argv[1]);
	if (ret)
		fprintf(stderr, "chat-model: %s\n", loom_error_message());
	gguf_writer_free(w);
	for (int i = 0; i < N_VOCAB; i++)
		free(tok[i]);
	return ret ? 1 : 0;
}
