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
#     MNN's own flags; the libraries the runner loads (MNN, MNN_Express) keep MNN's flags unchanged.
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
  if(MKB_CONVERTER_OPT)
    foreach(t MNNConvert MNNConvertDeps MNNConverterONNX MNNConverterOpt MNNConverterMNN MNNCompress libprotobuf)
      if(TARGET ${t})
        set_property(TARGET ${t} APPEND PROPERTY COMPILE_OPTIONS ${MKB_CONVERTER_OPT})
      endif()
    endforeach()
  endif()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL mkb_trim_converter)
