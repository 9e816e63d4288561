# CTest dashboard script for a nightly machine: configure, build, test (unit, GPU and one
# certification test per case) and submit to CDash.
#
#   ctest -S ci/nightly.cmake -DD9M_CDASH=https://cdash.example.org/submit.php?project=d9m \
#         [-DD9M_SITE=gpu-node-7] [-DD9M_BUILD_NAME=h100-driver-560] [-DD9M_MODEL=Nightly] [-DD9M_CUDA=OFF]
#
# Without D9M_CDASH it runs everything and submits nothing. The store the certification tests
# wrote and the reports are left in the build folder (certify/), for `d9m merge` upstream.
cmake_minimum_required(VERSION 3.25)
get_filename_component(CTEST_SOURCE_DIRECTORY "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(CTEST_BINARY_DIRECTORY "${CTEST_SOURCE_DIRECTORY}/build/nightly")
file(MAKE_DIRECTORY "${CTEST_BINARY_DIRECTORY}")
set(CTEST_NIGHTLY_START_TIME "00:00:00 UTC")
if(NOT DEFINED D9M_CUDA)
  set(D9M_CUDA AUTO)
endif()
if(NOT DEFINED D9M_SITE)
  cmake_host_system_information(RESULT D9M_SITE QUERY HOSTNAME)
endif()
if(NOT DEFINED D9M_BUILD_NAME)
  set(D9M_BUILD_NAME "${CMAKE_SYSTEM_NAME}-d9m")
endif()
if(NOT DEFINED D9M_MODEL)
  set(D9M_MODEL Nightly)
endif()
set(CTEST_SITE "${D9M_SITE}")
set(CTEST_BUILD_NAME "${D9M_BUILD_NAME}")
set(CTEST_CMAKE_GENERATOR Ninja)
set(CTEST_CONFIGURATION_TYPE Release)
if(DEFINED D9M_CDASH)
  set(CTEST_SUBMIT_URL "${D9M_CDASH}")
endif()
cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)

ctest_start(${D9M_MODEL})
ctest_configure(OPTIONS "-DCMAKE_BUILD_TYPE=Release;-DD9M_TESTS=ON;-DD9M_CUDA=${D9M_CUDA}" RETURN_VALUE configure_rc)
if(NOT configure_rc EQUAL 0)
  message(FATAL_ERROR "d9m nightly: configure failed (${configure_rc})")
endif()
ctest_build(PARALLEL_LEVEL ${cores} RETURN_VALUE build_rc)
ctest_test(PARALLEL_LEVEL ${cores} RETURN_VALUE test_rc)
if(DEFINED D9M_CDASH)
  ctest_submit()
endif()
if(NOT build_rc EQUAL 0 OR NOT test_rc EQUAL 0)
  message(FATAL_ERROR "d9m nightly: build ${build_rc}, tests ${test_rc}")
endif()
