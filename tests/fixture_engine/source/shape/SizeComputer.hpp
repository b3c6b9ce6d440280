// Fixture engine: output shape inference for every runtime op type.
#pragma once
#include <string>
#include <vector>

#include "core/OpType.hpp"
#include "core/Tensor.hpp"

namespace MNN {

// Allocates every output with its shape and type; false (with *err set) on invalid inputs/attributes.
bool computeOutputShapes(const Op& op, const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                         std::string* err);

// Normalizes a possibly negative axis; -1 when out of range.
int normalizeAxis(int axis, int rank);

}  // namespace MNN
