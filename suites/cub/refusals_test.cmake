# Compiles refusals.cu once per refused level with the pinned CCCL and expects each compile to
# fail with CCCL's own static_assert (the reason the reduce family's variant gives). Arguments:
# -DNVCC= -DCCCL= (the wheel's include folder) -DARCH= (one architecture) -DSRC= -DOUT= (a scratch file).
set(expected
  "1|cumsum/cub.run_to_run|run_to_run or gpu_to_gpu is only supported for integral types with known operators"
  "2|cumsum/cub.gpu_to_gpu|run_to_run or gpu_to_gpu is only supported for integral types with known operators"
  "3|segmented_reduce/cub.gpu_to_gpu|gpu_to_gpu determinism is not supported for device segmented reductions"
  # No environment overload of InclusiveSum (nvcc's words for a call no overload takes).
  "4|cumsum/cub.not_guaranteed (ExclusiveSum over N+1 instead of InclusiveSum)|DeviceScan::InclusiveSum\" matches the argument list")
foreach(entry IN LISTS expected)
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 refusal)
  list(GET parts 1 variant)
  list(GET parts 2 assertion)
  execute_process(
    COMMAND "${NVCC}" -std=c++20 "-arch=sm_${ARCH}" "-I${CCCL}" "-DD9M_REFUSAL=${refusal}" -c "${SRC}" -o "${OUT}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    if(refusal EQUAL 4)
      message(FATAL_ERROR "${variant}: CCCL at ${CCCL} now has an environment overload of DeviceScan::InclusiveSum; "
                          "kernels/reduce/reduce_cub.cu's ScanCall should call it instead of the padded ExclusiveSum")
    endif()
    message(FATAL_ERROR "${variant}: CCCL at ${CCCL} now compiles this level for float sums; "
                        "kernels/reduce/reduce_cub.cu registers it as refused: make it run and give it a claim")
  endif()
  string(FIND "${out}${err}" "${assertion}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${variant}: the compile failed, but not with CCCL's assertion \"${assertion}\":\n${out}${err}")
  endif()
  message(STATUS "${variant}: refused at compile time (\"${assertion}\")")
endforeach()
