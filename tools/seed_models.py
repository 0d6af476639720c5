"""Model classes of the project's seed notebooks (/work/shared/seeds), copied for the fixture
generator (tools/make_fixtures.py).

The bodies are copied faithfully: parameter and buffer names, bias choices, activations and
the order of operations are those of the notebooks, so `state_dict()` gives the tensor names a
user of that notebook would save. Only three things changed: class names carry the seed's
number (several notebooks define a `LayerNorm`), code that is not part of the model
(generation, training, printing, plots) is left out, and comments are shortened.
The post-LayerNorm model, which no seed has, is in tools/postln_model.py.
"""
import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------
# Seed 000 (000_fc9a1ee48e4e5cb2.txt, "GPT-2 Small (124M) Architecture"): separate
# W_query/W_key/W_value, LayerNorm scale/shift, custom tanh GELU, out_head without bias and NOT
# tied to tok_emb (the notebook only counts parameters "with tying").
# cfg keys: vocab_size, context_length, emb_dim, n_heads, n_layers, drop_rate, qkv_bias.


class S000MultiHeadAttention(nn.Module):  # seed 000
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        q = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        attn = (q @ k.transpose(-2, -1)) / (self.head_dim ** 0.5)
        attn = attn.masked_fill(self.mask[:n, :n].bool(), float("-inf"))
        attn = self.dropout(torch.softmax(attn, dim=-1))
        out = (attn @ v).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out_proj(out)


class S000LayerNorm(nn.Module):  # seed 000
    def __init__(self, emb_dim):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift


class S000GELU(nn.Module):  # seed 000: tanh approximation
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(
            torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * x ** 3)
        ))


class S000FeedForward(nn.Module):  # seed 000
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]),
            S000GELU(),
            nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"])
        )

    def forward(self, x):
        return self.layers(x)


class S000TransformerBlock(nn.Module):  # seed 000: pre-LN
    def __init__(self, cfg):
        super().__init__()
        self.att = S000MultiHeadAttention(
            d_in=cfg["emb_dim"],
            d_out=cfg["emb_dim"],
            context_length=cfg["context_length"],
            dropout=cfg["drop_rate"],
            num_heads=cfg["n_heads"],
            qkv_bias=cfg["qkv_bias"]
        )
        self.ff = S000FeedForward(cfg)
        self.norm1 = S000LayerNorm(cfg["emb_dim"])
        self.norm2 = S000LayerNorm(cfg["emb_dim"])
        self.drop = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        x = x + self.drop(self.att(self.norm1(x)))
        x = x + self.drop(self.ff(self.norm2(x)))
        return x


class S000GPTModel(nn.Module):  # seed 000
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(
            *[S000TransformerBlock(cfg) for _ in range(cfg["n_layers"])]
        )
        self.final_norm = S000LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, idx):
        batch_size, seq_len = idx.shape
        tok_emb = self.tok_emb(idx)
        pos_emb = self.pos_emb(torch.arange(seq_len, device=idx.device))
        x = self.drop_emb(tok_emb + pos_emb)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        logits = self.out_head(x)
        return logits


# ---------------------------------------------------------------------------------------------
# Seed 002 (002_75e09339a899e6dd.txt, "Week 3.1: Introducing GPT Architecture"): fused c_attn
# nn.Linear with bias, LayerNorm weight/bias, F.gelu (exact, erf) or F.relu, lm_head tied to
# wte (`self.wte.weight = self.lm_head.weight`), causal mask buffer [1, 1, n, n] (tril).


class S002GPT2Config:  # seed 002
    def __init__(self, vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                 dropout=0.1, activation_function="gelu"):
        self.vocab_size = vocab_size
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.n_head = n_head
        self.dropout = dropout
        self.activation_function = activation_function


class S002LayerNorm(nn.Module):  # seed 002
    def __init__(self, ndim, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        x = (x - mean) / torch.sqrt(var + 1e-5)
        if self.bias is not None:
            x = self.weight * x + self.bias
        else:
            x = self.weight * x
        return x


class S002CausalSelfAttention(nn.Module):  # seed 002
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=True)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=True)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.head_size = config.n_embd // config.n_head
        self.register_buffer(
            "mask",
            torch.tril(torch.ones(config.n_positions, config.n_positions))
            .view(1, 1, config.n_positions, config.n_positions)
        )

    def forward(self, x):
        batch_size, sequence_length, _ = x.size()
        qkv = self.c_attn(x)
        q, k, v = qkv.split(self.n_embd, dim=2)
        q = q.view(batch_size, sequence_length, self.n_head, self.head_size).transpose(1, 2)
        k = k.view(batch_size, sequence_length, self.n_head, self.head_size).transpose(1, 2)
        v = v.view(batch_size, sequence_length, self.n_head, self.head_size).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :sequence_length, :sequence_length] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(batch_size, sequence_length, self.n_embd)
        y = self.resid_dropout(self.c_proj(y))
        return y


class S002MLP(nn.Module):  # seed 002
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=True)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=True)
        self.dropout = nn.Dropout(config.dropout)
        if config.activation_function == "gelu":
            self.activation = F.gelu
        elif config.activation_function == "relu":
            self.activation = F.relu
        else:
            raise ValueError(f"Unknown activation function: {config.activation_function}")

    def forward(self, x):
        x = self.c_fc(x)
        x = self.activation(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class S002Block(nn.Module):  # seed 002: pre-LN
    def __init__(self, config):
        super().__init__()
        self.ln_1 = S002LayerNorm(config.n_embd)
        self.attn = S002CausalSelfAttention(config)
        self.ln_2 = S002LayerNorm(config.n_embd)
        self.mlp = S002MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class S002GPT2(nn.Module):  # seed 002 (generate() left out)
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([S002Block(config) for _ in range(config.n_layer)])
        self.ln_f = S002LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        self.config = config

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        batch_size, sequence_length = idx.size()
        assert sequence_length <= self.config.n_positions
        token_embeddings = self.wte(idx)
        position_ids = torch.arange(0, sequence_length, dtype=torch.long, device=device).unsqueeze(0)
        position_embeddings = self.wpe(position_ids)
        x = self.drop(token_embeddings + position_embeddings)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


# ---------------------------------------------------------------------------------------------
# Seed 003 (003_84516165b4db15b7.txt, "Scratchpad 1 - build GPT model"): separate W_q/W_k/W_v
# (bias = qkv_bias, False in its config), out_proj defined twice (the second replaces the
# first; same name), out_head = nn.Linear with the default bias=True, untied. The scaling by
# 1/sqrt(head_dim) is applied after masking, which gives the same result (-inf stays -inf).
# config keys: vocab_size, context_length, embedding_dim, n_heads, n_layers, dropout_rate, qkv_bias.


class S003LayerNorm(nn.Module):  # seed 003
    def __init__(self, config):
        super().__init__()
        embedding_dim = config["embedding_dim"]
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(embedding_dim))
        self.shift = nn.Parameter(torch.zeros(embedding_dim))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift


class S003MultiHeadAttention(nn.Module):  # seed 003
    def __init__(self, d_in, d_out, context_length, droupout, n_heads, qkv_bias=False):
        super().__init__()
        assert d_out % n_heads == 0, "d_out must be must divisible by n_heads"
        self.d_out = d_out
        self.n_heads = n_heads
        self.head_dim = d_out // n_heads
        self.W_q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_v = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
        self.dropout = nn.Dropout(droupout)
        self.out_proj = nn.Linear(d_out, d_out)  # sic: defined twice in the notebook

    def forward(self, x):
        batch_size, seq_len, d_in = x.shape
        keys = self.W_k(x)
        queries = self.W_q(x)
        values = self.W_v(x)
        keys = keys.view(batch_size, seq_len, self.n_heads, self.head_dim)
        queries = queries.view(batch_size, seq_len, self.n_heads, self.head_dim)
        values = values.view(batch_size, seq_len, self.n_heads, self.head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:seq_len, :seq_len]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        context_vec = context_vec.transpose(1, 2)
        context_vec = context_vec.contiguous().view(batch_size, seq_len, self.d_out)
        context_vec = self.out_proj(context_vec)
        return context_vec


class S003GELU(nn.Module):  # seed 003: tanh approximation
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(
            torch.sqrt(torch.tensor(2.0 / torch.pi)) *
            (x + 0.044715 * torch.pow(x, 3))
        ))


class S003FeedForward(nn.Module):  # seed 003
    def __init__(self, config):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(config["embedding_dim"], config["embedding_dim"] * 4),
            S003GELU(),
            nn.Linear(config["embedding_dim"] * 4, config["embedding_dim"])
        )

    def forward(self, x):
        return self.layers(x)


class S003TransformerBlock(nn.Module):  # seed 003: pre-LN
    def __init__(self, config):
        super().__init__()
        self.norm1 = S003LayerNorm(config)
        self.att = S003MultiHeadAttention(
            d_in=config["embedding_dim"],
            d_out=config["embedding_dim"],
            context_length=config["context_length"],
            droupout=config["dropout_rate"],
            n_heads=config["n_heads"],
            qkv_bias=config["qkv_bias"]
        )
        self.norm2 = S003LayerNorm(config)
        self.ff = S003FeedForward(config)
        self.drop_shortcut = nn.Dropout(config["dropout_rate"])

    def forward(self, x):
        shortcut = x
        x = self.norm1(x)
        x = self.att(x)
        x = self.drop_shortcut(x)
        x = x + shortcut
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.drop_shortcut(x)
        x = x + shortcut
        return x


class S003GPTModel(nn.Module):  # seed 003 ("GPT with real Layernorm and Transformer Blocks")
    def __init__(self, config):
        super().__init__()
        self.tok_emb = nn.Embedding(config["vocab_size"], config["embedding_dim"])
        self.pos_emb = nn.Embedding(config["context_length"], config["embedding_dim"])
        self.dropout_emb = nn.Dropout(config["dropout_rate"])
        self.transformer_blocks = nn.Sequential(
            *[S003TransformerBlock(config) for _ in range(config["n_layers"])]
        )
        self.final_norm = S003LayerNorm(config)
        self.out_head = nn.Linear(config["embedding_dim"], config["vocab_size"])

    def forward(self, in_idx):
        batch_size, seq_len = in_idx.shape
        tok_emb = self.tok_emb(in_idx)
        pos_emb = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = tok_emb + pos_emb
        x = self.dropout_emb(x)
        x = self.transformer_blocks(x)
        x = self.final_norm(x)
        logits = self.out_head(x)
        return logits


# ---------------------------------------------------------------------------------------------
# Seed 004 (004_ba4a72f2bb3ad0de.txt, "GPT Research Paper | Part II"): GPT-1 config with
# n_inner, embeddings.wte/wpe, LayerNorm gamma/beta, fused c_attn with bias, tanh GELU,
# lm_head tied to embeddings.wte, causal mask buffer [1, 1, n, n] (tril).


@dataclass
class S004GPTConfig:  # seed 004
    vocab_size: int = 40478
    n_positions: int = 512
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int = 3072
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    resid_pdrop: float = 0.1

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def s004_gelu_approx(x: torch.Tensor) -> torch.Tensor:  # seed 004: gelu_approx
    return 0.5 * x * (1.0 + torch.tanh(
        math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))
    ))


class S004LayerNorm(nn.Module):  # seed 004
    def __init__(self, n_embd: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(n_embd))
        self.beta = nn.Parameter(torch.zeros(n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        x_norm = (x - mean) / torch.sqrt(var + self.eps)
        return self.gamma * x_norm + self.beta


class S004CausalSelfAttention(nn.Module):  # seed 004
    def __init__(self, config: S004GPTConfig):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.head_dim = config.n_embd // config.n_head
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        mask = torch.tril(torch.ones(config.n_positions, config.n_positions))
        self.register_buffer('mask', mask.view(1, 1, config.n_positions, config.n_positions))

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        B, T, C = x.shape
        qkv = self.c_attn(x)
        q, k, v = qkv.split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.masked_fill(self.mask[:, :, :T, :T] == 0, float('-inf'))
        attn_weights = F.softmax(attn, dim=-1)
        attn_weights = self.attn_dropout(attn_weights)
        out = attn_weights @ v
        out = out.transpose(1, 2).contiguous().view(B, T, C)
        out = self.resid_dropout(self.c_proj(out))
        return out, attn_weights


class S004MLP(nn.Module):  # seed 004
    def __init__(self, config: S004GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, config.n_inner)
        self.c_proj = nn.Linear(config.n_inner, config.n_embd)
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.c_fc(x)
        x = s004_gelu_approx(x)
        x = self.c_proj(x)
        return self.dropout(x)


class S004Block(nn.Module):  # seed 004: pre-LN
    def __init__(self, config: S004GPTConfig):
        super().__init__()
        self.ln_1 = S004LayerNorm(config.n_embd)
        self.attn = S004CausalSelfAttention(config)
        self.ln_2 = S004LayerNorm(config.n_embd)
        self.mlp = S004MLP(config)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        attn_out, attn_weights = self.attn(self.ln_1(x))
        x = x + attn_out
        x = x + self.mlp(self.ln_2(x))
        return x, attn_weights


class S004GPTEmbeddings(nn.Module):  # seed 004
    def __init__(self, config: S004GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.embd_pdrop)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        B, T = input_ids.shape
        tok_emb = self.wte(input_ids)
        pos_emb = self.wpe(torch.arange(T, device=input_ids.device))
        return self.drop(tok_emb + pos_emb)


class S004GPT(nn.Module):  # seed 004 (the parameter-count print left out)
    def __init__(self, config: S004GPTConfig):
        super().__init__()
        self.config = config
        self.embeddings = S004GPTEmbeddings(config)
        self.blocks = nn.ModuleList([S004Block(config) for _ in range(config.n_layer)])
        self.ln_f = S004LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.embeddings.wte.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, input_ids: torch.Tensor, targets: Optional[torch.Tensor] = None):
        x = self.embeddings(input_ids)
        for block in self.blocks:
            x, _ = block(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss
