/* SPDX-License-Identifier: MIT */
/*
 * Build-time: turns watcher.bpf.o into a C header (watcher_obj.h's types) that the
 * daemon's loader compiles in, so that loading the watcher reads no ELF, parses no BTF
 * and probes no kernel feature (libbpf's skeleton did all three at every load).
 *
 *   watcher-gen watcher.bpf.o > watcher_obj.gen.h
 *
 * It takes each raw_tp/<tracepoint> section's instructions, their relocations (a load of
 * the map `rings` or of a .rodata variable, nothing else: anything else fails the
 * build, naming it), the .rodata size and the offsets of its variables, and the license.
 * Built for the host, linked with libelf.
 */
#include <gelf.h>
#include <libelf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SECTION_PREFIX "raw_tp/"

static const char *object_path;

static _Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void fail(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "watcher-gen: %s: ", object_path);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(1);
}

struct object {
        Elf *elf;
        size_t shstrndx;
        Elf_Scn *symtab;
        size_t rodata, maps, license; /* section indexes, 0 when absent */
};

static const char *section_name(const struct object *o, Elf_Scn *scn) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
                fail("unreadable section header: %s", elf_errmsg(-1));
        return elf_strptr(o->elf, o->shstrndx, sh.sh_name);
}

static Elf_Data *section_data(Elf_Scn *scn) {
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d)
                fail("unreadable section: %s", elf_errmsg(-1));
        return d;
}

static void symbol(const struct object *o, size_t index, GElf_Sym *ret, const char **ret_name) {
        GElf_Shdr sh;
        gelf_getshdr(o->symtab, &sh);
        if (!gelf_getsym(section_data(o->symtab), (int)index, ret))
                fail("no symbol %zu", index);
        *ret_name = elf_strptr(o->elf, sh.sh_link, ret->st_name);
}

/* The offset of a .rodata variable, for the loader to write the value at. */
static void print_rodata_offset(const struct object *o, const char *var, const char *macro) {
        Elf_Data *d = section_data(o->symtab);
        GElf_Shdr sh;
        gelf_getshdr(o->symtab, &sh);
        for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
                GElf_Sym s;
                gelf_getsym(d, (int)i, &s);
                if (s.st_shndx == o->rodata && !strcmp(elf_strptr(o->elf, sh.sh_link, s.st_name), var)) {
                        printf("#define %s %llu\n", macro, (unsigned long long)s.st_value);
                        return;
                }
        }
        fail("no variable %s in .rodata", var);
}

/* The ld_imm64 instructions that load a map, as relocations the loader applies: their
 * number. */
static size_t print_relocs(const struct object *o, const char *prog, Elf_Scn *rel,
                           const struct bpf_insn *insns, size_t count) {
        GElf_Shdr sh;
        gelf_getshdr(rel, &sh);
        Elf_Data *d = section_data(rel);
        size_t n = sh.sh_size / sh.sh_entsize;
        printf("static const struct watcher_reloc %s_relocs[%zu] = {\n", prog, n ? n : 1);
        for (size_t i = 0; i < n; i++) {
                GElf_Rel r;
                GElf_Sym s;
                const char *name;
                gelf_getrel(d, (int)i, &r);
                symbol(o, GELF_R_SYM(r.r_info), &s, &name);
                size_t at = r.r_offset / sizeof(struct bpf_insn);
                if (at + 1 >= count || insns[at].code != (BPF_LD | BPF_IMM | BPF_DW))
                        fail("%s: relocation of %s at instruction %zu is not a 64-bit load", prog, name, at);
                if (s.st_shndx == o->maps && !strcmp(name, "rings"))
                        printf("        { %zu, WATCHER_MAP_RINGS, 0 },\n", at);
                else if (s.st_shndx == o->rodata)
                        printf("        { %zu, WATCHER_MAP_RODATA, %llu },\n", at,
                               (unsigned long long)s.st_value + (unsigned)insns[at].imm);
                else
                        fail("%s: relocation of %s, which is neither the map rings nor a .rodata variable "
                             "(the loader knows no other)",
                             prog, name);
        }
        printf("};\n");
        return n;
}

/* The function at offset 0 of the program's section: the program's name. */
static void function_name(const struct object *o, Elf_Scn *scn, char name[BPF_OBJ_NAME_LEN]) {
        GElf_Shdr sh;
        gelf_getshdr(o->symtab, &sh);
        Elf_Data *syms = section_data(o->symtab);
        name[0] = 0;
        for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
                GElf_Sym s;
                gelf_getsym(syms, (int)i, &s);
                if (s.st_shndx == elf_ndxscn(scn) && GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_value == 0)
                        snprintf(name, BPF_OBJ_NAME_LEN, "%s", elf_strptr(o->elf, sh.sh_link, s.st_name));
        }
        if (!name[0])
                fail("section %s has no function", section_name(o, scn));
}

static void print_prog(const struct object *o, Elf_Scn *scn, Elf_Scn *rel, char name[BPF_OBJ_NAME_LEN]) {
        Elf_Data *d = section_data(scn);
        const struct bpf_insn *insns = d->d_buf;
        size_t n = d->d_size / sizeof(*insns);
        function_name(o, scn, name);
        printf("static const struct bpf_insn %s_insns[] = {\n", name);
        for (size_t i = 0; i < n; i++)
                printf("        { 0x%02x, %u, %u, %d, %d },\n", insns[i].code, insns[i].dst_reg,
                       insns[i].src_reg, insns[i].off, insns[i].imm);
        printf("};\n");
        size_t relocs = rel ? print_relocs(o, name, rel, insns, n) : 0;
        if (!rel)
                printf("static const struct watcher_reloc %s_relocs[1];\n", name);
        printf("static const struct watcher_prog %s_prog = { \"%s\", \"%s\", %s_insns, %zu, %s_relocs, %zu };\n\n",
               name, name, section_name(o, scn) + strlen(SECTION_PREFIX), name, n, name, relocs);
}

/* The relocation section of section index target, or NULL. */
static Elf_Scn *relocations_of(const struct object *o, size_t target) {
        for (Elf_Scn *scn = elf_nextscn(o->elf, NULL); scn; scn = elf_nextscn(o->elf, scn)) {
                GElf_Shdr sh;
                gelf_getshdr(scn, &sh);
                if (sh.sh_type == SHT_REL && sh.sh_info == target)
                        return scn;
        }
        return NULL;
}

int main(int argc, char **argv) {
        if (argc != 2) {
                fprintf(stderr, "usage: watcher-gen watcher.bpf.o > watcher_obj.gen.h\n");
                return 2;
        }
        object_path = argv[1];
        if (elf_version(EV_CURRENT) == EV_NONE)
                fail("libelf: %s", elf_errmsg(-1));
        int fd = open(object_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                fail("cannot open: %m");
        struct object o = { .elf = elf_begin(fd, ELF_C_READ, NULL) };
        if (!o.elf || elf_getshdrstrndx(o.elf, &o.shstrndx) < 0)
                fail("not an ELF object: %s", elf_errmsg(-1));
        for (Elf_Scn *scn = elf_nextscn(o.elf, NULL); scn; scn = elf_nextscn(o.elf, scn)) {
                GElf_Shdr sh;
                gelf_getshdr(scn, &sh);
                const char *name = section_name(&o, scn);
                if (sh.sh_type == SHT_SYMTAB)
                        o.symtab = scn;
                else if (!strcmp(name, ".rodata"))
                        o.rodata = elf_ndxscn(scn);
                else if (!strcmp(name, ".maps"))
                        o.maps = elf_ndxscn(scn);
                else if (!strcmp(name, "license"))
                        o.license = elf_ndxscn(scn);
        }
        if (!o.symtab || !o.rodata || !o.maps || !o.license)
                fail("no %s section", !o.symtab   ? ".symtab"
                                      : !o.rodata ? ".rodata"
                                      : !o.maps   ? ".maps"
                                                  : "license");

        printf("/* Generated by bpf/watcher_gen.c from %s: do not edit. */\n", object_path);
        printf("#include \"util.h\"\n#include \"watcher_obj.h\"\n\n");
        GElf_Shdr rodata;
        gelf_getshdr(elf_getscn(o.elf, o.rodata), &rodata);
        printf("#define WATCHER_RODATA_SIZE %llu\n", (unsigned long long)rodata.sh_size);
        print_rodata_offset(&o, "root_cgroup_id", "WATCHER_RODATA_ROOT_CGROUP_ID");
        print_rodata_offset(&o, "root_level", "WATCHER_RODATA_ROOT_LEVEL");
        print_rodata_offset(&o, "off", "WATCHER_RODATA_OFF");
        Elf_Data *license = section_data(elf_getscn(o.elf, o.license));
        printf("static const char watcher_license[] = \"%.*s\";\n\n",
               (int)strnlen(license->d_buf, license->d_size), (const char *)license->d_buf);

        char names[8][BPF_OBJ_NAME_LEN];
        size_t progs = 0;
        for (Elf_Scn *scn = elf_nextscn(o.elf, NULL); scn; scn = elf_nextscn(o.elf, scn)) {
                GElf_Shdr sh;
                gelf_getshdr(scn, &sh);
                if (sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR) || !sh.sh_size)
                        continue;
                if (strncmp(section_name(&o, scn), SECTION_PREFIX, strlen(SECTION_PREFIX)))
                        fail("program section %s is not a raw_tp/ one (the loader knows no other)",
                             section_name(&o, scn));
                if (progs == 8)
                        fail("more than 8 programs");
                print_prog(&o, scn, relocations_of(&o, elf_ndxscn(scn)), names[progs++]);
        }
        printf("static const struct watcher_prog *const watcher_progs[] = {");
        for (size_t i = 0; i < progs; i++)
                printf(" &%s_prog,", names[i]);
        printf(" };\n");
        elf_end(o.elf);
        close(fd);
        return fflush(stdout) == 0 ? 0 : 1;
}
