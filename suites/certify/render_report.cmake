# The last certification test: renders the report of everything the certification tests
# stored, then verifies the store. Fails if a claim was broken or the store is unsound.
foreach(fmt md json)
  execute_process(COMMAND "${D9M}" report --db "${DIR}/certify.sqlite" --format ${fmt} -o "${DIR}/report.${fmt}"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "d9m report --format ${fmt} exited ${rc}")
  endif()
endforeach()
execute_process(COMMAND "${D9M}" verify --db "${DIR}/certify.sqlite" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "d9m verify exited ${rc}")
endif()
message(STATUS "report: ${DIR}/report.md")
