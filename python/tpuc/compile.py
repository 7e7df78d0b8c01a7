"""``torch.compile(..., backend="tpu")``: the compiler backend named after
the device (Hugging Face's generate() asks for it by that name when it
compiles a static-cache decoding step on a ``tpu`` model).

It traces forward and backward with AOTAutograd and runs the captured
graphs op by op on the device, exactly as eager mode would; compiling a
whole graph into one PJRT program is not done yet."""


def backend(gm, example_inputs, **kwargs):
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend("aot_eager")(gm, example_inputs, **kwargs)
