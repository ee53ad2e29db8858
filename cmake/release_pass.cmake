# Target `release_pass`: what the release build needs for ci/test.sh's release pass, which runs only
# the tests labelled `slow` or `verdict` (the sanitizer pass runs every other test). That is the whole
# build but the unit-test binaries none of whose cases carry those labels: about half of the build's
# compile time. A binary with such cases is named by attest_verdict_test_binary() (attest_discover_tests
# does it); ci/test.sh checks that the release pass lists the same tests as the full sanitizer build,
# so a binary left out by mistake fails CI instead of dropping its tests.

function(attest_verdict_test_binary target)
  set_property(GLOBAL APPEND PROPERTY ATTEST_VERDICT_TEST_BINARIES ${target})
endfunction()

function(attest_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    attest_targets_below(${sub} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called once every target exists (the end of the top CMakeLists.txt).
function(attest_add_release_pass_target)
  attest_targets_below(${PROJECT_SOURCE_DIR} targets)
  get_property(verdict_binaries GLOBAL PROPERTY ATTEST_VERDICT_TEST_BINARIES)
  set(needed)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    get_target_property(excluded ${target} EXCLUDE_FROM_ALL)
    if(type STREQUAL "INTERFACE_LIBRARY" OR excluded)
      continue()
    endif()
    if(type STREQUAL "EXECUTABLE" AND target MATCHES "_test$" AND NOT target IN_LIST verdict_binaries)
      continue()
    endif()
    list(APPEND needed ${target})
  endforeach()
  add_custom_target(release_pass)
  add_dependencies(release_pass ${needed})
endfunction()
