# Install step (CMakeLists.txt, TK_INSTALL_KERNELS): tk-aot compiles every
# ready-made kernel for each of TK_KERNEL_ARCHS into a fresh scratch directory
# of the build tree (TK_PACK_SCRATCH), which is then installed as the kernel
# pack TK_PACK_DIR, replacing the one before (a pack holds one build's
# entries), readable by every user whatever the umask of whoever installs.
# Without ptxas, or on any other failure, the install goes on without a pack
# and says why.
file(REMOVE_RECURSE "${TK_PACK_SCRATCH}")
set(ok 1)
foreach(arch IN LISTS TK_KERNEL_ARCHS)
  message(STATUS "Kernel pack: tk-aot -a ${arch} all")
  execute_process(COMMAND "${TK_AOT}" -a "${arch}" -d "${TK_PACK_SCRATCH}" all
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    string(REGEX MATCH "tk-aot: [^\n]*" summary "${out}")
    message(STATUS "${summary}")
  else()
    message(WARNING "No kernel pack (the library compiles its kernels on first use): ${err}")
    set(ok 0)
    break()
  endif()
endforeach()
if(IS_ABSOLUTE "${TK_PACK_DIR}")
  set(dest "$ENV{DESTDIR}${TK_PACK_DIR}")
else()
  set(dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${TK_PACK_DIR}")
endif()
file(REMOVE_RECURSE "${dest}")
if(ok)
  file(INSTALL DESTINATION "${dest}" TYPE DIRECTORY FILES "${TK_PACK_SCRATCH}/"
       DIR_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                       WORLD_READ WORLD_EXECUTE
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
       FILES_MATCHING PATTERN "*.tkc" PATTERN "tk-pack")
endif()
