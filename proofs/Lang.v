(** * Lang: the elementwise fragment (spec section 4): expressions, the typing judgment
    under [where] assumptions, run-time typing and a small-step semantics.

    Symbolic typing ([has_type]) is what the checker does: types carry dim expressions and
    dtype variables, broadcasting equalities are obligations under assumptions [A]. The
    semantics runs one instance ([inst]: concrete dims, groups and dtypes, as an entry's
    specialisation). A value is abstracted to its concrete type (dtype, integer shape,
    placement): the fragment's static content; element arithmetic is not modelled. *)
From Coq Require Import List Arith String Bool.
From Kina Require Import Dims Types Rules.
Import ListNotations.

Inductive expr : Type :=
| EVar (x : string)
| ELitF                       (** a float literal such as [1.0]: weak *)
| ELitI                       (** an integer literal such as [2]: weak *)
| EVal (v : cty)              (** a run-time value (never written in source) *)
| EUn (op : string) (e : expr)
| EBin (k : bkind) (op : string) (a b : expr)
| ECast (d : dtype) (e : expr)
| ERed (op : string) (keep : bool) (ax : axis) (e : expr)  (** [(sum e :axis a :keepdims k)] *)
| EMat (a b : expr)                                         (** [(matmul a b)] *)
| ELet (x : string) (e1 e2 : expr).

Definition ctx (T : Type) := list (string * T).

Fixpoint lookup {T : Type} (G : ctx T) (x : string) : option T :=
  match G with
  | [] => None
  | (y, t) :: G' => if String.eqb x y then Some t else lookup G' x
  end.

(** ** The typing judgment for expressions (symbolic, under assumptions [A]). *)
Inductive has_type (A : list constr) : ctx ty -> expr -> ty -> Prop :=
| T_Var : forall G x t, lookup G x = Some t -> has_type A G (EVar x) t
| T_LitF : forall G, has_type A G ELitF (Ty WeakF scalar DevAny)
| T_LitI : forall G, has_type A G ELitI (Ty WeakI scalar DevAny)
| T_Un : forall G op e t t',
    has_type A G e t -> s_unary t = Some t' -> has_type A G (EUn op e) t'
| T_Cast : forall G d e t,
    is_weak d = false -> has_type A G e t -> has_type A G (ECast d e) (s_cast d t)
| T_Bin : forall G k op a b ta tb d d' dev s,
    has_type A G a ta -> has_type A G b tb ->
    join_dtype (ty_dtype ta) (ty_dtype tb) = Some d ->
    bin_dtype k op d = Some d' ->
    join_dev (ty_device ta) (ty_device tb) = Some dev ->
    shape_bcast A (ty_shape ta) (ty_shape tb) s ->
    has_type A G (EBin k op a b) (Ty (weak_result d' (is_scalar_shape s)) s dev)
| T_Red : forall G op keep ax e t t',
    has_type A G e t -> s_reduce op keep ax t = Some t' -> has_type A G (ERed op keep ax e) t'
| T_Mat : forall G a b ta tb d dev s,
    has_type A G a ta -> has_type A G b tb ->
    mm_dtype (ty_dtype ta) (ty_dtype tb) = Some d ->
    join_dev (ty_device ta) (ty_device tb) = Some dev ->
    mm_shape A (ty_shape ta) (ty_shape tb) s ->
    has_type A G (EMat a b) (Ty d s dev)
| T_Let : forall G x e1 e2 t1 t2,
    has_type A G e1 t1 -> has_type A ((x, t1) :: G) e2 t2 -> has_type A G (ELet x e1 e2) t2.

(** ** Defns (spec section 2): parameters, declared result, [where] assumptions, body. A
    defn is well typed when its body's type is provably equal to the declared one under its
    assumptions ([ty_equiv]: same dtype, placement and group, fixed dims provably equal). *)
Record defn : Type := Defn {
  d_params : list (string * ty);
  d_result : ty;
  d_where : list constr;
  d_body : expr
}.

Definition ty_equiv (A : list constr) (t u : ty) : Prop :=
  ty_dtype t = ty_dtype u /\ ty_device t = ty_device u
  /\ group (ty_shape t) = group (ty_shape u)
  /\ Forall2 (provably_eq A) (fixed (ty_shape t)) (fixed (ty_shape u)).

Definition wf_ctx (G : ctx ty) : Prop := forall x t, lookup G x = Some t -> wf_ty t.

Definition defn_ok (f : defn) : Prop :=
  wf_ctx (rev (d_params f))
  /\ exists t, has_type (d_where f) (rev (d_params f)) (d_body f) t
               /\ ty_equiv (d_where f) t (d_result f).

(** A call binds the arguments by [let], in declared order. *)
Fixpoint bind_args (ps : list (string * ty)) (args : list cty) (body : expr) : expr :=
  match ps, args with
  | (x, _) :: ps', v :: args' => ELet x (EVal v) (bind_args ps' args' body)
  | _, _ => body
  end.

(** ** Run-time typing of one instance: the concrete rules. *)
Inductive rt_type (i : inst) : ctx cty -> expr -> cty -> Prop :=
| R_Var : forall G x t, lookup G x = Some t -> rt_type i G (EVar x) t
| R_LitF : forall G, rt_type i G ELitF (CTy WeakF [] DevAny)
| R_LitI : forall G, rt_type i G ELitI (CTy WeakI [] DevAny)
| R_Val : forall G v, rt_type i G (EVal v) v
| R_Un : forall G op e t t',
    rt_type i G e t -> c_unary t = Some t' -> rt_type i G (EUn op e) t'
| R_Cast : forall G d e t,
    is_weak d = false -> rt_type i G e t ->
    rt_type i G (ECast d e) (c_cast (inst_dtype i d) t)
| R_Bin : forall G k op a b ta tb t,
    rt_type i G a ta -> rt_type i G b tb -> c_binary k op ta tb = Some t ->
    rt_type i G (EBin k op a b) t
| R_Red : forall G op keep ax e t t',
    rt_type i G e t -> c_reduce op keep ax t = Some t' -> rt_type i G (ERed op keep ax e) t'
| R_Mat : forall G a b ta tb t,
    rt_type i G a ta -> rt_type i G b tb -> c_matmul ta tb = Some t ->
    rt_type i G (EMat a b) t
| R_Let : forall G x e1 e2 t1 t2,
    rt_type i G e1 t1 -> rt_type i ((x, t1) :: G) e2 t2 -> rt_type i G (ELet x e1 e2) t2.

(** ** Small-step semantics, left to right, call by value. *)
Fixpoint subst (x : string) (v : cty) (e : expr) : expr :=
  match e with
  | EVar y => if String.eqb x y then EVal v else e
  | ELitF | ELitI | EVal _ => e
  | EUn op a => EUn op (subst x v a)
  | EBin k op a b => EBin k op (subst x v a) (subst x v b)
  | ECast d a => ECast d (subst x v a)
  | ERed op keep ax a => ERed op keep ax (subst x v a)
  | EMat a b => EMat (subst x v a) (subst x v b)
  | ELet y e1 e2 => ELet y (subst x v e1) (if String.eqb x y then e2 else subst x v e2)
  end.

Definition is_value (e : expr) : Prop := exists v, e = EVal v.

Inductive step (i : inst) : expr -> expr -> Prop :=
| S_LitF : step i ELitF (EVal (CTy WeakF [] DevAny))
| S_LitI : step i ELitI (EVal (CTy WeakI [] DevAny))
| S_Un : forall op v v', c_unary v = Some v' -> step i (EUn op (EVal v)) (EVal v')
| S_Cast : forall d v, step i (ECast d (EVal v)) (EVal (c_cast (inst_dtype i d) v))
| S_Bin : forall k op va vb v,
    c_binary k op va vb = Some v -> step i (EBin k op (EVal va) (EVal vb)) (EVal v)
| S_Red : forall op keep ax v v',
    c_reduce op keep ax v = Some v' -> step i (ERed op keep ax (EVal v)) (EVal v')
| S_Mat : forall va vb v, c_matmul va vb = Some v -> step i (EMat (EVal va) (EVal vb)) (EVal v)
| S_Let : forall x v e2, step i (ELet x (EVal v) e2) (subst x v e2)
| S_UnC : forall op e e', step i e e' -> step i (EUn op e) (EUn op e')
| S_CastC : forall d e e', step i e e' -> step i (ECast d e) (ECast d e')
| S_RedC : forall op keep ax e e', step i e e' -> step i (ERed op keep ax e) (ERed op keep ax e')
| S_BinL : forall k op a a' b, step i a a' -> step i (EBin k op a b) (EBin k op a' b)
| S_BinR : forall k op va b b',
    step i b b' -> step i (EBin k op (EVal va) b) (EBin k op (EVal va) b')
| S_MatL : forall a a' b, step i a a' -> step i (EMat a b) (EMat a' b)
| S_MatR : forall va b b', step i b b' -> step i (EMat (EVal va) b) (EMat (EVal va) b')
| S_LetC : forall x e1 e1' e2, step i e1 e1' -> step i (ELet x e1 e2) (ELet x e1' e2).

Inductive multi (i : inst) : expr -> expr -> Prop :=
| M_refl : forall e, multi i e e
| M_step : forall e e' e'', step i e e' -> multi i e' e'' -> multi i e e''.
