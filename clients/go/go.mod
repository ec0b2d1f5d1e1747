module once.example/once

go 1.19
