// The converter front ends the kit does not build (Caffe, TensorFlow, TFLite): entry points with the
// signatures MNNConvert's command line calls, each failing with a message (see trim.cmake for why).
#include <cstdio>
#include <memory>
#include <string>

namespace MNN {
struct NetT;
}

#define MKB_EXPORT __attribute__((visibility("default")))

static int mkbFrontEndAbsent(const char* framework) {
    std::fprintf(stderr, "MNNConvert as built by the evaluation kit converts ONNX only: no %s front end\n",
                 framework);
    return 1;
}

MKB_EXPORT int caffe2MNNNet(const std::string, const std::string, const std::string, std::unique_ptr<MNN::NetT>&) {
    return mkbFrontEndAbsent("Caffe");
}

MKB_EXPORT int tensorflow2MNNNet(const std::string, const std::string, std::unique_ptr<MNN::NetT>&) {
    return mkbFrontEndAbsent("TensorFlow");
}

MKB_EXPORT int tflite2MNNNet(const std::string, const std::string, std::unique_ptr<MNN::NetT>&) {
    return mkbFrontEndAbsent("TFLite");
}
