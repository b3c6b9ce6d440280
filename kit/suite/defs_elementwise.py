"""Element-wise categories: unary, binary, trigonometry, activation, logic (as data)."""

from __future__ import annotations

from kit.suite.spec import Const, In, Out, TaskDef, f32, uniform_const


def _unary(cat, tid, op, shape, expr, low=-1.0, high=1.0, dist="uniform", attrs=None, summary="", **kw):
    return TaskDef(
        id=tid,
        category=cat,
        op=op,
        summary=summary or f"Element-wise {op}: y = {expr.replace('x', 'x')}.",
        inputs=[In("x", shape, dist=dist, low=low, high=high)],
        outputs=[Out("y")],
        forward=f"return {expr}",
        attrs=attrs or {},
        **kw,
    )


def unary() -> list[TaskDef]:
    c = "unary"
    return [
        _unary(c, "abs_1d", "Abs", (1048576,), "torch.abs(x)", -4, 4),
        _unary(c, "neg_2d", "Neg", (1024, 1024), "torch.neg(x)", -4, 4),
        _unary(c, "exp_3d", "Exp", (16, 256, 256), "torch.exp(x)", -5, 5),
        _unary(c, "log_4d", "Log", (4, 32, 64, 64), "torch.log(x)", 0.01, 10, dist="positive",
               note="Inputs are positive (Log's domain)."),
        _unary(c, "sqrt_4d", "Sqrt", (4, 32, 64, 64), "torch.sqrt(x)", 0.0, 100.0, dist="positive",
               note="Inputs are positive (Sqrt's domain)."),
        _unary(c, "reciprocal_4d", "Reciprocal", (4, 64, 64, 64), "torch.reciprocal(x)", -4.0, 4.0),
        _unary(c, "floor_3d", "Floor", (32, 256, 128), "torch.floor(x)", -10, 10),
        _unary(c, "ceil_5d", "Ceil", (4, 8, 16, 32, 64), "torch.ceil(x)", -10, 10),
        _unary(c, "round_2d", "Round", (2048, 512), "torch.round(x)", -10, 10,
               note="Round halves to even (as torch.round and numpy.round)."),
        _unary(c, "sign_3d", "Sign", (64, 128, 128), "torch.sign(x)", -1, 1),
        _unary(c, "erf_4d", "Erf", (4, 64, 32, 32), "torch.erf(x)", -3, 3),
    ]


def trigonometry() -> list[TaskDef]:
    c = "trigonometry"
    pi2 = 6.2831855
    return [
        _unary(c, "sin_4d", "Sin", (4, 16, 64, 64), "torch.sin(x)", -pi2, pi2),
        _unary(c, "cos_3d", "Cos", (16, 128, 128), "torch.cos(x)", -pi2, pi2),
        _unary(c, "tan_2d", "Tan", (512, 512), "torch.tan(x)", -1.4, 1.4,
               note="Inputs stay inside (-1.4, 1.4), away from the poles at +-pi/2."),
        _unary(c, "asin_1d", "Asin", (262144,), "torch.asin(x)", -0.99, 0.99,
               note="Inputs are inside Asin's domain [-1, 1]."),
        _unary(c, "acos_4d", "Acos", (4, 64, 32, 32), "torch.acos(x)", -0.99, 0.99,
               note="Inputs are inside Acos's domain [-1, 1]."),
        _unary(c, "atan_3d", "Atan", (16, 128, 128), "torch.atan(x)", -10, 10),
        _unary(c, "sinh_2d", "Sinh", (512, 512), "torch.sinh(x)", -4, 4),
        _unary(c, "cosh_4d", "Cosh", (4, 16, 64, 64), "torch.cosh(x)", -4, 4),
        _unary(c, "tanh_5d", "Tanh", (2, 8, 16, 32, 32), "torch.tanh(x)", -4, 4),
        _unary(c, "asinh_3d", "Asinh", (16, 128, 128), "torch.asinh(x)", -10, 10),
        _unary(c, "acosh_2d", "Acosh", (512, 512), "torch.acosh(x)", 1.01, 10, dist="positive",
               note="Inputs are >= 1.01 (Acosh's domain is [1, inf))."),
        _unary(c, "atanh_4d", "Atanh", (4, 64, 32, 32), "torch.atanh(x)", -0.95, 0.95,
               note="Inputs are inside Atanh's domain (-1, 1)."),
    ]


def _binary(cat, tid, op, a, b, expr, summary, ra=(-4, 4), rb=(-4, 4), dist_b="uniform", dtype="float32",
            out="float32", attrs=None, **kw):
    return TaskDef(
        id=tid,
        category=cat,
        op=op,
        summary=summary,
        inputs=[In("a", a, dtype=dtype, dist="integers" if dtype.startswith("int") else ("bool" if dtype == "bool" else "uniform"),
                   low=ra[0], high=ra[1]),
                In("b", b, dtype=dtype, dist="integers" if dtype.startswith("int") else ("bool" if dtype == "bool" else dist_b),
                   low=rb[0], high=rb[1])],
        outputs=[Out("y", out)],
        forward=f"return {expr}",
        attrs=attrs or {},
        **kw,
    )


def binary() -> list[TaskDef]:
    c = "binary"
    return [
        _binary(c, "add_4d", "Add", (4, 64, 64, 64), (4, 64, 64, 64), "a + b",
                "Element-wise addition of two tensors of the same shape."),
        _binary(c, "sub_bcast_channel", "Sub", (4, 64, 64, 64), (1, 64, 1, 1), "a - b",
                "Subtraction with a per-channel operand broadcast over batch and spatial dims."),
        _binary(c, "mul_bcast_row", "Mul", (1024, 1024), (1024,), "a * b",
                "Multiplication with a 1-D operand broadcast over the rows (numpy broadcasting)."),
        _binary(c, "div_3d", "Div", (32, 256, 128), (32, 256, 128), "a / b",
                "Element-wise division; the divisor is kept away from zero.", rb=(0.5, 4.0), dist_b="positive",
                note="The divisor is positive in [0.5, 4) to keep the quotient well conditioned."),
        _binary(c, "pow_bcast_scalar", "Pow", (4, 256, 256), (1,), "torch.pow(a, b)",
                "Power with a positive base and a single exponent broadcast to every element.",
                ra=(0.1, 4.0), rb=(-2.0, 2.0),
                note="The base is positive (a real power of a negative base is NaN)."),
        _binary(c, "max_5d_bcast", "Max", (2, 8, 16, 32, 64), (32, 64), "torch.maximum(a, b)",
                "Element-wise maximum of a 5-D tensor and a 2-D tensor broadcast over the leading dims."),
        _binary(c, "min_2d", "Min", (1024, 1024), (1024, 1024), "torch.minimum(a, b)",
                "Element-wise minimum of two matrices."),
        _binary(c, "mod_fmod_3d", "Mod", (16, 256, 256), (16, 256, 256), "torch.fmod(a, b)",
                "Floating-point remainder a - trunc(a / b) * b (C fmod; the result has the sign of a), "
                "ONNX Mod with fmod=1.", ra=(-10.0, 10.0), rb=(1.0, 5.0), dist_b="positive", attrs={"fmod": 1},
                note="The divisor is positive in [1, 5)."),
    ]


def activation() -> list[TaskDef]:
    c = "activation"
    slope = uniform_const("prelu_channel_4d/slope", (64, 1, 1), 0.5, low=0.0)
    return [
        _unary(c, "relu_2d", "Relu", (2048, 512), "torch.relu(x)", summary="ReLU: y = max(x, 0)."),
        _unary(c, "relu_4d", "Relu", (8, 64, 56, 56), "torch.relu(x)", summary="ReLU on an NCHW feature map."),
        _unary(c, "leaky_relu_4d", "LeakyRelu", (8, 64, 56, 56), "F.leaky_relu(x, negative_slope=0.01)",
               attrs={"alpha": 0.01}, summary="Leaky ReLU with slope 0.01: y = x if x >= 0 else 0.01 * x."),
        _unary(c, "leaky_relu_3d_alpha02", "LeakyRelu", (32, 256, 128), "F.leaky_relu(x, negative_slope=0.2)",
               -4, 4, attrs={"alpha": 0.2}, summary="Leaky ReLU with slope 0.2."),
        _unary(c, "sigmoid_3d", "Sigmoid", (32, 256, 128), "torch.sigmoid(x)", -6, 6,
               summary="Logistic sigmoid y = 1 / (1 + exp(-x))."),
        _unary(c, "softmax_last_2d", "Softmax", (1024, 1000), "torch.softmax(x, dim=-1)", -4, 4,
               attrs={"axis": -1}, summary="Softmax over the last axis of a [batch, classes] matrix."),
        _unary(c, "softmax_axis1_4d", "Softmax", (4, 64, 32, 64), "torch.softmax(x, dim=1)", -4, 4,
               attrs={"axis": 1}, summary="Softmax over the channel axis of an NCHW tensor."),
        _unary(c, "softmax_axis0_3d", "Softmax", (32, 128, 128), "torch.softmax(x, dim=0)", -4, 4,
               attrs={"axis": 0}, summary="Softmax over the first axis of a 3-D tensor."),
        _unary(c, "hard_sigmoid_4d", "HardSigmoid", (4, 64, 56, 56), "torch.clamp(0.2 * x + 0.5, 0.0, 1.0)",
               -4, 4, attrs={"alpha": 0.2, "beta": 0.5},
               summary="Hard sigmoid y = clip(0.2 * x + 0.5, 0, 1) (ONNX alpha=0.2, beta=0.5)."),
        _unary(c, "celu_3d", "Celu", (16, 256, 128), "F.celu(x, alpha=0.5)", -4, 4, attrs={"alpha": 0.5},
               summary="CELU with alpha 0.5: y = max(0, x) + min(0, 0.5 * (exp(x / 0.5) - 1))."),
        TaskDef(
            id="prelu_channel_4d", category=c, op="PRelu",
            summary="PReLU with one learned slope per channel: y = x if x >= 0 else slope[c] * x.",
            inputs=[In("x", (4, 64, 56, 56), low=-4, high=4)], outputs=[Out("y")],
            consts=[Const("slope", slope, "per-channel negative slope, broadcast as [C, 1, 1]")],
            init_args=[("channels", 64)],
            init_code="self.slope = nn.Parameter(torch.full((channels, 1, 1), 0.25))",
            forward="return torch.where(x >= 0, x, self.slope * x)",
        ),
        TaskDef(
            id="prelu_shared_2d", category=c, op="PRelu",
            summary="PReLU with one slope per column of a [rows, features] matrix (broadcast over rows).",
            inputs=[In("x", (1024, 512), low=-4, high=4)], outputs=[Out("y")],
            consts=[Const("slope", uniform_const("prelu_shared_2d/slope", (512,), 0.5, low=0.05),
                          "negative slope per feature")],
            init_args=[("features", 512)],
            init_code="self.slope = nn.Parameter(torch.full((features,), 0.25))",
            forward="return torch.where(x >= 0, x, self.slope * x)",
        ),
    ]


def logic() -> list[TaskDef]:
    c = "logic"
    return [
        _binary(c, "equal_int32_3d", "Equal", (32, 256, 128), (32, 256, 128), "torch.eq(a, b)",
                "Element-wise equality of two int32 tensors (bool output).", ra=(0, 3), rb=(0, 3), dtype="int32",
                out="bool", note="Integers in [0, 3] so that about a quarter of the elements are equal."),
        _binary(c, "equal_int64_bcast", "Equal", (64, 128, 128), (128,), "torch.eq(a, b)",
                "Equality of an int64 tensor with a broadcast int64 row.", ra=(-2, 2), rb=(-2, 2), dtype="int64",
                out="bool"),
        _binary(c, "greater_4d", "Greater", (8, 32, 64, 64), (8, 32, 64, 64), "torch.gt(a, b)",
                "Element-wise a > b (bool output).", out="bool"),
        _binary(c, "less_bcast", "Less", (32, 256, 128), (256, 1), "torch.lt(a, b)",
                "Element-wise a < b with b broadcast along the last axis.", out="bool"),
        _binary(c, "greater_or_equal_int32", "GreaterOrEqual", (1024, 1024), (1024, 1024), "torch.ge(a, b)",
                "Element-wise a >= b on int32 tensors with many ties.", ra=(-3, 3), rb=(-3, 3), dtype="int32",
                out="bool"),
        _binary(c, "less_or_equal_int32", "LessOrEqual", (64, 128, 128), (64, 128, 128), "torch.le(a, b)",
                "Element-wise a <= b on int32 tensors with many ties.", ra=(-3, 3), rb=(-3, 3), dtype="int32",
                out="bool"),
        _binary(c, "and_3d", "And", (32, 256, 128), (32, 256, 128), "torch.logical_and(a, b)",
                "Logical AND of two bool tensors.", dtype="bool", out="bool"),
        _binary(c, "or_bcast", "Or", (32, 128, 128), (128,), "torch.logical_or(a, b)",
                "Logical OR with a broadcast bool row.", dtype="bool", out="bool"),
        _binary(c, "xor_2d", "Xor", (1024, 1024), (1024, 1024), "torch.logical_xor(a, b)",
                "Logical XOR of two bool matrices.", dtype="bool", out="bool"),
        TaskDef(id="not_3d", category=c, op="Not", summary="Logical NOT of a bool tensor.",
                inputs=[In("x", (32, 256, 128), dtype="bool", dist="bool")], outputs=[Out("y", "bool")],
                forward="return torch.logical_not(x)"),
        _binary(c, "bitwise_xor_int32", "BitwiseXor", (32, 256, 128), (32, 256, 128), "torch.bitwise_xor(a, b)",
                "Bitwise XOR of two int32 tensors (negative values included, two's complement).",
                ra=(-100000, 100000), rb=(-100000, 100000), dtype="int32", out="int32"),
        TaskDef(id="where_3d", category=c, op="Where",
                summary="Select element-wise: y = x if cond else z (all three of the same shape).",
                inputs=[In("cond", (16, 256, 128), dtype="bool", dist="bool"), In("x", (16, 256, 128)),
                        In("z", (16, 256, 128), low=-4, high=4)],
                outputs=[Out("y")], forward="return torch.where(cond, x, z)"),
        TaskDef(id="where_bcast_4d", category=c, op="Where",
                summary="Select with broadcasting: a [1, 1, H, W] mask chooses between an NCHW tensor and a "
                        "per-channel [1, C, 1, 1] fill value.",
                inputs=[In("cond", (1, 1, 64, 64), dtype="bool", dist="bool"), In("x", (8, 32, 64, 64)),
                        In("z", (1, 32, 1, 1), low=-4, high=4)],
                outputs=[Out("y")], forward="return torch.where(cond, x, z)"),
    ]


def all_defs() -> list[TaskDef]:
    return unary() + binary() + trigonometry() + activation() + logic()


__all__ = ["all_defs", "f32"]
