"""Post-LayerNorm GPT for the fixtures (tools/make_fixtures.py); no seed notebook has one.

The post-LayerNorm block of the 2017 Transformer and GPT-1's reference code,
x = LN(x + attn(x)); x = LN(x + mlp(x)), with ReLU, no final LayerNorm and an untied LM head
with bias. Its linear weights are stored [in, out] (Hugging Face Conv1D orientation) so that
this fixture exercises layout "custom" with linear = "in_out". No mask buffer: the causal mask
is built per call.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class PostLNConv1D(nn.Module):
    """y = x @ weight + bias, weight [in, out]."""

    def __init__(self, n_in, n_out, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out)) if bias else None

    def forward(self, x):
        y = x @ self.weight
        return y + self.bias if self.bias is not None else y


class PostLNAttention(nn.Module):
    def __init__(self, emb_dim, n_heads, qkv_bias):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = emb_dim // n_heads
        self.query = PostLNConv1D(emb_dim, emb_dim, qkv_bias)
        self.key = PostLNConv1D(emb_dim, emb_dim, qkv_bias)
        self.value = PostLNConv1D(emb_dim, emb_dim, qkv_bias)
        self.out = PostLNConv1D(emb_dim, emb_dim)

    def forward(self, x):
        b, n, e = x.shape
        split = lambda t: t.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        future = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, n, e))


class PostLNBlock(nn.Module):
    def __init__(self, emb_dim, n_heads, ffn_dim, qkv_bias):
        super().__init__()
        self.attn = PostLNAttention(emb_dim, n_heads, qkv_bias)
        self.attn_norm = nn.LayerNorm(emb_dim, eps=1e-5)
        self.fc = PostLNConv1D(emb_dim, ffn_dim)
        self.proj = PostLNConv1D(ffn_dim, emb_dim)
        self.mlp_norm = nn.LayerNorm(emb_dim, eps=1e-5)

    def forward(self, x):
        x = self.attn_norm(x + self.attn(x))
        return self.mlp_norm(x + self.proj(F.relu(self.fc(x))))


class PostLNTransformer(nn.Module):
    def __init__(self, vocab_size, context_length, emb_dim, n_heads, n_layers, ffn_dim, qkv_bias):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, emb_dim)
        self.position_embedding = nn.Embedding(context_length, emb_dim)
        self.layers = nn.ModuleList(
            [PostLNBlock(emb_dim, n_heads, ffn_dim, qkv_bias) for _ in range(n_layers)])
        self.head = nn.Linear(emb_dim, vocab_size, bias=True)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1])
        x = self.token_embedding(ids) + self.position_embedding(positions)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)
