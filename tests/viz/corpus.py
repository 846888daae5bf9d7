"""The models the drawing tests share: a document whose fragments nest, and torch modules of each family (a CNN, a
transformer layer, an LSTM) with example inputs."""
from __future__ import annotations

import torch

FRAGMENTS_TEXT = """version 1.0;
extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;
fragment unit( input: tensor<scalar>, w: tensor<scalar> ) -> ( output: tensor<scalar> )
{
    c = conv(input, w, padding = [(1,1),(1,1)]);
    output = relu(c + input);
}
fragment pair( input: tensor<scalar>, w: tensor<scalar> ) -> ( output: tensor<scalar>, skip: tensor<scalar> )
{
    first = unit(input, w);
    output = unit(first, w);
    skip = 2.0 * input;
}
graph G( x ) -> ( y, z )
{
    x = external(shape = [1,4,8,8]);
    w = variable(shape = [4,4,3,3], label = 'w');
    a, s = pair(x, w);
    b = concat([a, s, x], axis = 1);
    y = max_pool(b, size = [1,1,2,2], stride = [1,1,2,2]);
    z = unit(a, w);
}
"""


def torch_models() -> dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]:
    """Seeded modules in eval mode, with their example inputs."""
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10))
    transformer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
    lstm = torch.nn.LSTM(8, 12, batch_first=True)
    return {"cnn": (cnn.eval(), (torch.randn(1, 3, 8, 8),)),
            "transformer": (transformer.eval(), (torch.randn(1, 5, 16),)),
            "lstm": (lstm.eval(), (torch.randn(1, 4, 8),))}
