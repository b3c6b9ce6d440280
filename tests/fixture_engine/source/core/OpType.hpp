// Fixture engine: runtime op types (names follow the real engine's).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace MNN {

enum OpType {
    OpType_UnaryOp = 0,
    OpType_BinaryOp,
    OpType_ArgMax,
    OpType_Softmax,
    OpType_Reduction,
    OpType_MatMul,
    OpType_Transpose,
    OpType_Raster,
    OpType_MAX
};

const char* opTypeName(OpType t);
bool parseOpType(const std::string& name, OpType* out);

// Attribute values of UnaryOp's "opType".
enum UnaryOpOperation { UnaryOpOperation_ABS = 0, UnaryOpOperation_NEG = 1, UnaryOpOperation_EXP = 7 };
// Attribute values of BinaryOp's "opType".
enum BinaryOpOperation {
    BinaryOpOperation_ADD = 0,
    BinaryOpOperation_SUB = 1,
    BinaryOpOperation_MUL = 2,
    BinaryOpOperation_DIV = 3
};

// One node of a loaded model.  Integer attributes are lists (a scalar is a 1-element list).
struct Op {
    OpType type = OpType_MAX;
    std::string name;
    std::vector<int> inputIndexes;
    std::vector<int> outputIndexes;
    std::map<std::string, std::vector<int>> ints;
    std::map<std::string, float> floats;

    int intAttr(const std::string& key, int def) const {
        auto it = ints.find(key);
        return (it == ints.end() || it->second.empty()) ? def : it->second[0];
    }
    const std::vector<int>* listAttr(const std::string& key) const {
        auto it = ints.find(key);
        return it == ints.end() ? nullptr : &it->second;
    }
    float floatAttr(const std::string& key, float def) const {
        auto it = floats.find(key);
        return it == floats.end() ? def : it->second;
    }
};

}  // namespace MNN
