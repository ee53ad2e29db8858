#!/bin/sh
# merge_archive.sh AR SCRIPT: runs ar's MRI script (CMake cannot redirect a command's input).
exec "$1" -M < "$2"
