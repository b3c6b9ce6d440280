// Fixture converter CLI, mimicking MNNConvert's interface and messages:
//   MNNConvert -f ONNX --modelFile m.onnx --MNNModel out.fixmodel --bizCode MNN [--keepInputFormat=1]
// Prints "Converted Success!" on success.  On failure it prints the reason (for unsupported ops
// "These Op Not Support: ONNX::<Op> | ...") and "Converted Failed!" and, like MNNConvert, still exits 0.
// Only a command-line error exits non-zero (1).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/Graph.hpp"
#include "onnx/OnnxOpConverter.hpp"
#include "optimizer/onnxextra/OnnxExtraManager.hpp"

using namespace fixconv;

static int failed(const std::string& why) {
    if (!why.empty()) std::printf("%s\n", why.c_str());
    std::printf("Converted Failed!\n");
    return 0;
}

int main(int argc, char** argv) {
    std::map<std::string, std::string> args;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("-", 0) != 0) {
            std::fprintf(stderr, "unexpected argument: %s\n", argv[i]);
            return 1;
        }
        while (!a.empty() && a[0] == '-') a.erase(0, 1);
        std::string value;
        size_t eq = a.find('=');
        if (eq != std::string::npos) {
            value = a.substr(eq + 1);
            a = a.substr(0, eq);
        } else if (i + 1 < argc && argv[i + 1][0] != '-') {
            value = argv[++i];
        }
        args[a] = value;
    }
    if (args.count("f") == 0 || args.count("modelFile") == 0 || args.count("MNNModel") == 0) {
        std::fprintf(stderr, "usage: MNNConvert -f ONNX --modelFile m.onnx --MNNModel out --bizCode MNN\n");
        return 1;
    }
    if (args["f"] != "ONNX") {
        std::fprintf(stderr, "only -f ONNX is supported, got %s\n", args["f"].c_str());
        return 1;
    }
    std::printf("Start to Convert Other Model Format To MNN Model..., target version: fixture\n");
    std::ifstream in(args["modelFile"], std::ios::binary);
    if (!in) return failed("cannot open " + args["modelFile"]);
    std::stringstream bytes;
    bytes << in.rdbuf();
    OnnxModel model;
    std::string err;
    if (!readOnnxModel(bytes.str(), &model, &err)) return failed(args["modelFile"] + ": " + err);
    std::printf("ONNX opset: %lld, %zu nodes\n", static_cast<long long>(model.opset), model.nodes.size());

    ConvGraph graph(model);
    std::vector<std::string> unsupported;
    for (const OnnxNode& node : model.nodes) {
        OnnxConvertFunction fn = OnnxConverterRegistry::find(node.opType);
        if (fn == nullptr) fn = OnnxExtraManager::find(node.opType);
        if (fn == nullptr) {
            unsupported.push_back(node.opType);
            continue;
        }
        if (!fn(node, graph, &err)) return failed("Error for " + node.opType + " '" + node.name + "': " + err);
    }
    if (!unsupported.empty()) {
        std::string line = "These Op Not Support: ";
        for (const auto& op : unsupported) line += "ONNX::" + op + " | ";
        return failed(line);
    }
    if (!graph.write(args["MNNModel"], &err)) return failed(err);
    std::printf("Converted Success!\n");
    return 0;
}
