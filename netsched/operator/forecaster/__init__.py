"""The forecast loop: predicted start and completion of every unfinished GPUJob and pod gang."""
