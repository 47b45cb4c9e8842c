"""The text decoder: embedding, decoder layers, final norm, output layer (Megatron names)."""
import torch

from mindspeed_mm.models.common.module import MultiModalModule
from mindspeed_mm.models.common.standin_layers import TransformerBlock


class MMGPTModel(MultiModalModule):
    def __init__(self, config, transformer_layer_spec, vocab_size, max_sequence_length, pre_process=True,
                 post_process=True, reward_process=False, fp16_lm_cross_entropy=False, parallel_output=True,
                 share_embeddings_and_output_weights=False, position_embedding_type='mrope', rotary_percent=1.0,
                 rotary_base=10000, seq_len_interpolation_factor=None):
        super().__init__(config=config)
        if transformer_layer_spec is None:
            raise KeyError(f"no layer spec for text_decoder model_id {getattr(config, 'model_id', None)!r}")
        self.share_embeddings_and_output_weights = share_embeddings_and_output_weights
        self.embedding = torch.nn.Module()
        self.embedding.word_embeddings = torch.nn.Embedding(vocab_size, config.hidden_size)
        self.decoder = TransformerBlock(config, transformer_layer_spec, final_norm=True)
        if not share_embeddings_and_output_weights:
            self.output_layer = torch.nn.Linear(config.hidden_size, vocab_size, bias=False)

    def shared_embedding_or_output_weight(self):
        return self.embedding.word_embeddings.weight

    def forward(self, decoder_input):
        hidden = self.decoder(decoder_input, causal=True)
        if self.share_embeddings_and_output_weights:
            return hidden @ self.embedding.word_embeddings.weight.t()
        return self.output_layer(hidden)
