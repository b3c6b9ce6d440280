# The kit's trim of MNN's converter build (read by MNN's CMake after its project() call, through
# CMAKE_PROJECT_MNN_INCLUDE; the MNN tree itself is never changed).
#
# Why: the kit converts ONNX models only, yet MNN 3.2.2 builds MNNConvert with its Caffe, TensorFlow and
# TFLite front ends and their optimizer passes (about 200 of its 757 compile steps); and the converter only
# writes the .mnn model, it is never timed. So, at the end of the top-level directory (when every target
# exists):
#   * MNNConvertDeps links no Caffe, TensorFlow or TFLite front end; their three entry points come from
#     MKB_CONVERTER_STUBS (a kit source whose functions fail with a message);
#   * MNNConverterOpt leaves out the optimizer passes of those front ends (tfextra, caffeextra, tflitextra,
#     torchextra: each registers itself, and only models of its framework reach it);
#   * every converter target and the vendored protobuf compile with MKB_CONVERTER_OPT (e.g. -O0) after
#     MNN's own flags; the libraries the runner loads (MNN, MNN_Express) keep MNN's flags unchanged;
#   * with MKB_CONVERTER_PCH on, the converter's optimizer passes, ONNX front end and common sources compile
#     with a precompiled header of what nearly all of them include (the flatbuffers schema MNN_generated.h,
#     the Express API, the ONNX protobuf classes): parsing those headers is most of each file's compile time
#     at -O0. Only headers with include guards are in it (TemplateMerge.hpp and OnnxExtraManager.hpp have
#     none, so a second inclusion would redefine their classes).
if(NOT CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR)
  return()
endif()

function(mkb_trim_converter)
  if(NOT TARGET MNNConvertDeps)
    return()  # a build without the converter (a cross target)
  endif()
  if(NOT EXISTS "${MKB_CONVERTER_STUBS}")
    message(FATAL_ERROR "MKB_CONVERTER_STUBS: no such file: '${MKB_CONVERTER_STUBS}'")
  endif()
  get_target_property(deps MNNConvertDeps SOURCES)
  list(FILTER deps EXCLUDE REGEX "TARGET_OBJECTS:MNNConverter(TF|TFL|Caffe|Torch)>")
  list(APPEND deps "${MKB_CONVERTER_STUBS}")
  set_property(TARGET MNNConvertDeps PROPERTY SOURCES ${deps})
  get_target_property(passes MNNConverterOpt SOURCES)
  list(FILTER passes EXCLUDE REGEX "(^|/)optimizer/(tfextra|caffeextra|tflitextra|torchextra)/")
  set_property(TARGET MNNConverterOpt PROPERTY SOURCES ${passes})
  if(MKB_CONVERTER_PCH)
    set(common <algorithm> <map> <memory> <set> <string> <unordered_map> <vector>
        <MNN/MNNDefine.h> <MNN_generated.h> <MNN/expr/Expr.hpp> <MNN/expr/ExprCreator.hpp>
        <MNN/expr/MathOp.hpp> <MNN/expr/NeuralNetWorkOp.hpp>)
    set(onnx "${CMAKE_SOURCE_DIR}/tools/converter/source/onnx/onnxOpConverter.hpp")
    if(NOT EXISTS "${onnx}")
      message(FATAL_ERROR "MKB_CONVERTER_PCH: ${onnx} is missing: not the MNN tree the kit's trim was written for")
    endif()
    target_precompile_headers(MNNConverterOpt PRIVATE ${common})
    target_precompile_headers(MNNConvertDeps PRIVATE ${common})
    target_precompile_headers(MNNConverterONNX PRIVATE ${common} "${onnx}")
  endif()
  if(MKB_CONVERTER_OPT)
    foreach(t MNNConvert MNNConvertDeps MNNConverterONNX MNNConverterOpt MNNConverterMNN MNNCompress libprotobuf)
      if(TARGET ${t})
        set_property(TARGET ${t} APPEND PROPERTY COMPILE_OPTIONS ${MKB_CONVERTER_OPT})
      endif()
    endforeach()
  endif()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL mkb_trim_converter)
